# SPDX-License-Identifier: Apache-2.0
"""The non-speech sounds training mixes in as _silence_ (mega_kws_tools.augment.nonspeech,
--nonspeech-negatives): each sound measured on what it is (a tone's frequency, a chirp's
sweep, a beep's timing, a noise's spectral slope, the level drawn), and make_batch's use of
them (issue 83 item 5)."""

import wave

import numpy as np
import pytest

from mega_kws_tools.audio import write_wav
from mega_kws_tools.augment import batch
from mega_kws_tools.augment import nonspeech as ns
from mega_kws_tools.data import dataset as dataset_mod

SR = 16000


def peak_hz(x):
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return np.fft.rfftfreq(len(x), 1 / SR)[int(np.argmax(spectrum))]


def crossings_hz(x):
    """the frequency of a periodic signal from its upward zero crossings"""
    up = np.nonzero((x[:-1] < 0) & (x[1:] >= 0))[0]
    return (len(up) - 1) / ((up[-1] - up[0]) / SR)


@pytest.mark.parametrize("freq", [220.0, 440.0, 1000.0, 2000.0, 3150.0])
def test_tone_square_and_saw_have_the_frequency_asked(freq):
    n = SR
    assert abs(peak_hz(ns.tone(freq, n)) - freq) <= 1.0
    sq = ns.square(freq, n)
    assert set(np.unique(sq)) == {-1.0, 1.0} and abs(peak_hz(sq) - freq) <= 1.0
    saw = ns.sawtooth(freq, n)
    assert saw.min() >= -1.0 and saw.max() < 1.0 and abs(peak_hz(saw) - freq) <= 1.0
    # a sawtooth rises through each period and falls once per period
    assert abs(np.sum(np.diff(saw) < 0) - freq) <= 1


def test_chirp_sweeps_from_f0_to_f1():
    x = ns.chirp(300.0, 3000.0, 2 * SR)
    tenth = SR // 10
    assert abs(crossings_hz(x[:tenth]) - (300 + 2700 * 0.025)) < 30  # mean over the first 0.1 s
    assert abs(crossings_hz(x[-tenth:]) - (3000 - 2700 * 0.025)) < 30
    assert abs(crossings_hz(x[SR - tenth // 2:SR + tenth // 2]) - 1650) < 30


def test_gate_is_on_and_off_as_asked_from_its_start():
    env = ns.gate(SR, 0.1, 0.15, start_s=0.2)
    assert not env[:int(0.2 * SR)].any()
    on = env > 0
    edges = np.nonzero(np.diff(on.astype(int)))[0] + 1
    assert list(edges[:4]) == [3200, 4800, 7200, 8800], edges[:4]
    ramped = ns.gate(SR, 0.1, 0.15, start_s=0.2, ramp_s=0.01)
    assert ramped[3200] == 0.0 and 0 < ramped[3200 + 80] < 1 and ramped[3200 + 160] == 1.0
    assert (ramped <= env).all()


@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0])
def test_coloured_noise_falls_as_asked(exponent):
    x = ns.coloured_noise(4 * SR, exponent, np.random.default_rng(5))
    assert abs(np.sqrt(np.mean(x * x)) - 1.0) < 1e-6 and abs(x.mean()) < 1e-6
    power = np.abs(np.fft.rfft(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / SR)
    # mean power per octave band, 100 Hz to 6.4 kHz: a line of slope -exponent per doubling in log-log
    octaves = [power[(f >= lo) & (f < 2 * lo)].mean() for lo in 100 * 2.0 ** np.arange(6)]
    slope = np.polyfit(np.arange(6), np.log2(octaves), 1)[0]
    assert abs(slope + exponent) < 0.15, slope


def test_notes_are_pitched_sounds_that_change():
    x = ns.notes(2 * SR, np.random.default_rng(2))
    assert np.abs(x).max() > 0
    peaks = {peak_hz(x[s:s + SR // 10]) for s in range(0, 2 * SR, SR // 10)}
    assert len(peaks) >= 3 and all(100 <= p <= 880 * 5 + 20 for p in peaks), peaks


@pytest.mark.parametrize("kind", ns.KINDS)
def test_random_nonspeech_of_each_kind(kind):
    levels = []
    for seed in range(6):
        x = ns.random_nonspeech(SR, np.random.default_rng(seed), kind)
        assert x.dtype == np.float32 and x.shape == (SR,) and np.abs(x).max() <= 1.0
        assert np.array_equal(x, ns.random_nonspeech(SR, np.random.default_rng(seed), kind))
        levels.append(20 * np.log10(np.sqrt(np.mean(x.astype(np.float64) ** 2))))
    lo, hi = ns.RMS_DB_RANGE
    assert all(lo - 0.01 <= v <= hi + 0.01 for v in levels), levels  # clipping only lowers it
    assert max(levels) - min(levels) > 3, levels  # levels are drawn, not fixed


def test_random_nonspeech_draws_every_kind_and_refuses_an_unknown_one():
    rng = np.random.default_rng(0)
    shapes = {ns.random_nonspeech(SR, rng).tobytes() for _ in range(40)}
    assert len(shapes) == 40
    with pytest.raises(ValueError, match="speech: not a kind"):
        ns.random_nonspeech(SR, rng, "speech")


def test_beeps_are_bursts_between_silences():
    for seed in range(5):
        x = ns.random_nonspeech(2 * SR, np.random.default_rng(seed), "beeps")
        silent = np.abs(x) < 1e-7
        assert silent.mean() > 0.02 and (~silent).mean() > 0.01, seed


def test_nonspeech_window_starts_at_a_random_point_of_the_first_one_and_a_half_seconds():
    for seed in range(20):
        x = ns.nonspeech_window(np.random.default_rng(seed))
        assert x.shape == (2 * SR,)
        onset = int(np.argmax(np.abs(x) > 0))  # (a sound may start on a zero sample: +1)
        assert np.abs(x).max() > 0 and onset <= 3 * SR // 2 and not x[:onset].any(), (seed, onset)
    onsets = [int(np.argmax(np.abs(ns.nonspeech_window(np.random.default_rng(s))) > 0)) for s in range(20)]
    assert max(onsets) - min(onsets) > SR // 2, onsets  # onsets are drawn, not fixed


def test_make_batch_replaces_the_share_asked_with_silence_labelled_sounds(dataset):
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    silence = ds.labels.index("_silence_")
    keywords = np.nonzero(ds.y < 10)[0][:16]

    def draw(train=True, idx=keywords, seed=1, **options):
        return batch.make_batch(ds, idx, np.random.default_rng(seed), train, **options)
    (x0, y0), (x1, y1) = draw(), draw(nonspeech=0.0)
    assert (x0 == x1).all() and (y0 == y1).all()  # off: the batch of a run without the option
    xa, ya = draw(nonspeech=1.0)
    assert (ya == silence).all() and (y0 < 10).all()
    # each row is the window nonspeech_window draws from the same generator after the coin
    rng = np.random.default_rng(1)
    for row in xa.numpy():
        rng.random()
        assert np.array_equal(row, np.clip(ns.nonspeech_window(rng), -1, 1))
    _, yh = draw(idx=np.repeat(keywords, 25), seed=2, nonspeech=0.3)
    assert 0.2 < float((yh == silence).float().mean()) < 0.4
    assert (draw(train=False, nonspeech=1.0)[1] == y0).all()  # evaluation batches are never replaced


def test_make_batch_refuses_nonspeech_without_a_silence_class(dataset):
    ds = dataset_mod.Dataset(dataset, "sc10", "training", 0, 1)
    with pytest.raises(ValueError, match="need the _silence_ class"):
        batch.make_batch(ds, np.arange(4), np.random.default_rng(1), True, nonspeech=0.5)


def write_recording(path, x):
    write_wav(str(path), x.astype(np.int16))
    return str(path)


def test_load_recordings_reads_files_and_folders_and_refuses_what_it_cannot_use(tmp_path):
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-9000, 9000, n).astype(np.int16) for n in (SR, 3 * SR))
    (tmp_path / "music").mkdir()
    write_recording(tmp_path / "music" / "b.wav", b)
    write_recording(tmp_path / "music" / "a.wav", a)
    (tmp_path / "music" / "notes.txt").write_text("not audio")
    one = write_recording(tmp_path / "one.wav", b)
    got = ns.load_recordings([str(tmp_path / "music"), one])
    assert [len(x) for x in got] == [SR, 3 * SR, 3 * SR]  # a folder's .wav files in name order, then the file
    assert np.array_equal(got[0], a) and np.array_equal(got[2], b)
    assert ns.load_recordings([]) == []
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .wav file"):
        ns.load_recordings([str(tmp_path / "empty")])
    with wave.open(str(tmp_path / "fast.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(44100), w.writeframes(a.tobytes())
    with pytest.raises(ValueError, match="need 16 kHz"):
        ns.load_recordings([str(tmp_path / "fast.wav")])


def proportional_offsets(x, src):
    """The offsets o at which x is src[o:o + len(x)] times one gain: where the
    correlation reaches the Cauchy-Schwarz bound |x| |src[o:o + len(x)]|."""
    n, size = len(x), len(src) + len(x)
    x = x.astype(np.float64)
    corr = np.fft.irfft(np.fft.rfft(src, size) * np.conj(np.fft.rfft(x, size)), size)[:len(src) - n + 1]
    energy = np.cumsum(np.concatenate([[0.0], src * src]))
    bound = np.sqrt(energy[n:] - energy[:-n]) * np.linalg.norm(x)
    return np.nonzero(np.abs(corr) > bound * (1 - 1e-7))[0]


def test_recorded_slice_is_a_stretch_of_a_recording_at_a_drawn_level():
    rng = np.random.default_rng(4)
    music = [(np.sin(np.arange(4 * SR) * 0.01) * 20000 + rng.normal(0, 500, 4 * SR)).astype(np.int16)]
    src = music[0].astype(np.float64)
    levels = []
    for seed in range(8):
        x = ns.recorded_slice(music, SR, np.random.default_rng(seed))
        assert x.dtype == np.float32 and x.shape == (SR,) and np.abs(x).max() <= 1.0
        # where it was cut: the one offset at which the slice is the source times one gain
        offsets = proportional_offsets(x, src)
        assert len(offsets) == 1, (seed, offsets)
        seg = src[offsets[0]:offsets[0] + SR]
        assert np.allclose(x * (np.dot(seg, seg) / np.dot(x, seg)), seg, atol=2.0), seed
        levels.append(20 * np.log10(np.sqrt(np.mean(x.astype(np.float64) ** 2))))
    lo, hi = ns.RMS_DB_RANGE
    assert all(lo - 0.01 <= v <= hi + 0.01 for v in levels) and max(levels) - min(levels) > 3, levels
    short = np.array([1000, -1000, 3000], np.int16)  # shorter than asked: repeated
    x = ns.recorded_slice([short], 10, np.random.default_rng(0)).astype(np.float64)
    tiled = np.tile(short, 5).astype(np.float64)
    assert any(np.allclose(x, tiled[o:o + 10] * (x[0] / tiled[o]), rtol=1e-5) for o in range(3))
    quiet = [np.zeros(2 * SR, np.int16)]  # a pause: kept silent, not amplified noise
    assert not ns.recorded_slice(quiet, SR, np.random.default_rng(0)).any()


def test_nonspeech_window_takes_recordings_half_the_time_and_draws_as_before_without():
    music = [np.full(4 * SR, 12000, np.int16)]  # a constant: easy to tell from any generated sound
    for seed in range(10):  # without recordings: the very windows of before
        assert np.array_equal(ns.nonspeech_window(np.random.default_rng(seed)),
                              ns.nonspeech_window(np.random.default_rng(seed), []))
    recorded = 0
    for seed in range(200):
        x = ns.nonspeech_window(np.random.default_rng(seed), music)
        onset = int(np.argmax(np.abs(x) > 0))
        assert onset <= 3 * SR // 2 and not x[:onset].any()
        recorded += bool(np.ptp(x[onset:]) == 0)
    assert 70 <= recorded <= 130, recorded  # RECORDED_SHARE 0.5 of 200


def test_make_batch_passes_recordings_to_the_nonspeech_windows(dataset):
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    music = [np.full(4 * SR, 12000, np.int16)]
    idx = np.nonzero(ds.y < 10)[0][:16]
    x, y = batch.make_batch(ds, idx, np.random.default_rng(5), True, nonspeech=1.0, recordings=music)
    rng = np.random.default_rng(5)
    for row in x.numpy():
        rng.random()
        assert np.array_equal(row, np.clip(ns.nonspeech_window(rng, music), -1, 1))
    assert any(np.ptp(row[np.argmax(row != 0):]) == 0 for row in x.numpy())


def test_random_nonspeech_draws_kinds_with_the_weights_given():
    only_beeps = [1.0 if k == "beeps" else 0.0 for k in ns.KINDS]
    for seed in range(5):  # every sound a beep train: bursts between silences
        x = ns.random_nonspeech(2 * SR, np.random.default_rng(seed), weights=only_beeps)
        silent = np.abs(x) < 1e-7
        assert silent.mean() > 0.02 and (~silent).mean() > 0.01, seed
    # with weights, the kind is one draw of rng.choice, then the sound of that kind
    x = ns.random_nonspeech(SR, np.random.default_rng(3), weights=[0.5, 0, 0, 0, 0.5, 0, 0])
    first = ns.KINDS[int(np.random.default_rng(3).choice(len(ns.KINDS), p=[0.5, 0, 0, 0, 0.5, 0, 0]))]
    rng = np.random.default_rng(3)
    rng.choice(len(ns.KINDS), p=[0.5, 0, 0, 0, 0.5, 0, 0])
    assert np.array_equal(x, ns.random_nonspeech(SR, rng, first))
    for seed in range(5):  # no weights: the uniform draw of before
        rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
        kind = ns.KINDS[int(rng_b.integers(len(ns.KINDS)))]
        assert np.array_equal(ns.random_nonspeech(SR, rng_a), ns.random_nonspeech(SR, rng_b, kind))


# mine_nonspeech.py: the windows of non-speech a checkpoint reads as a keyword, as hard _silence_ examples


def test_hard_hops_skip_the_warm_up_keep_their_spacing_and_take_the_highest_keyword():
    from mega_kws_tools.training import mine_nonspeech as mn
    probs = np.zeros((12, 4))  # classes: two keywords, _silence_, _unknown_
    probs[:, 2] = 1.0
    probs[1, 0] = 0.9   # inside the warm-up (3 hops): skipped
    probs[4, 1] = 0.5   # kept (0.5 >= 0.4)
    probs[5, 0] = 0.8   # within SPACING_HOPS of hop 4: skipped
    probs[6, 0] = 0.7   # kept
    probs[8, 1] = 0.39  # below the minimum
    probs[9, 3] = 0.95  # _unknown_ is no keyword
    probs[11, 0], probs[11, 1] = 0.45, 0.6  # kept, with the higher keyword's score
    assert mn.SPACING_HOPS == 2
    assert mn.hard_hops(probs, [0, 1], 3, 0.4) == [(4, 0.5), (6, 0.7), (11, 0.6)]
    assert mn.hard_hops(probs, [0, 1], 0, 0.4)[0] == (1, 0.9)
    assert mn.hard_hops(probs, [0, 1], 3, 0.99) == []


def test_mine_keeps_the_two_seconds_ending_at_each_hard_hop():
    from mega_kws_tools.training import mine_nonspeech as mn
    chunk = 4000
    x = (np.arange(10 * SR) % 30000).astype(np.int16)  # each sample tells where it was
    def posteriors(samples):
        assert samples.dtype == np.float32 and abs(samples[1] * 32768.0 - 1) < 1e-6
        p = np.zeros((len(samples) // chunk, 3))
        p[:, 1] = 1.0
        for hop, score in ((7, 0.9), (30, 0.6)):
            if hop < len(p):
                p[hop, 0] = score
        return p
    audio, times, scores, names = mn.mine(posteriors, [("a.wav", x), ("b.wav", x[:20 * chunk])], [0], 4, chunk, 0.5)
    assert names.tolist() == ["a.wav", "a.wav", "b.wav"]  # b ends before hop 30
    assert times.tolist() == [8 * chunk / SR, 31 * chunk / SR, 8 * chunk / SR]
    assert scores.tolist() == [0.9, 0.6, 0.9]
    assert audio.shape == (3, 2 * SR) and audio.dtype == np.int16
    assert (audio[1] == x[31 * chunk - 2 * SR:31 * chunk]).all()
    assert (audio[0][:2 * SR - 8 * chunk] == 0).all() and (audio[0][2 * SR - 8 * chunk:] == x[:8 * chunk]).all()
    empty = mn.mine(posteriors, [("c.wav", x[:7 * chunk])], [0], 4, chunk, 0.5)[0]  # ends before hop 7
    assert empty.shape == (0, 2 * SR)


def test_generated_sources_alternate_beeps_with_every_kind_and_repeat_with_their_seed():
    from mega_kws_tools.training import mine_nonspeech as mn
    a = list(mn.generated_sources(2 * len(ns.KINDS), 5))
    kinds = [name.split("-", 1)[1] for name, _ in a]
    assert kinds[0::2] == ["beeps"] * len(ns.KINDS) and kinds[1::2] == list(ns.KINDS)
    assert all(x.dtype == np.int16 and len(x) == mn.GENERATED_S * SR and np.abs(x).max() > 0 for _, x in a)
    b = list(mn.generated_sources(3, 5))
    c = list(mn.generated_sources(3, 6))
    assert all((x == y).all() for (_, x), (_, y) in zip(a[:3], b))
    assert not (b[0][1] == c[0][1]).all()


def test_mine_nonspeech_refuses_the_music_the_check_scans(tmp_path):
    import subprocess
    import sys
    for held in ("/usr/share/games/frozen-bubble/snd", "/usr/share/games/chromium-bsu/wav/music_game.wav"):
        run = subprocess.run([sys.executable, "-m", "mega_kws_tools.training.mine_nonspeech", "--checkpoint",
                              str(tmp_path / "none.pt"), "--audio", held, "-o", str(tmp_path / "o.npz")],
                             capture_output=True, text=True)
        assert run.returncode == 1 and "the non-speech check scans" in run.stderr, run.stderr
    run = subprocess.run([sys.executable, "-m", "mega_kws_tools.training.mine_nonspeech", "--checkpoint",
                          str(tmp_path / "none.pt"), "-o", str(tmp_path / "o.npz")], capture_output=True, text=True)
    assert run.returncode == 2 and "--audio or --generated" in run.stderr
    assert not (tmp_path / "o.npz").exists()

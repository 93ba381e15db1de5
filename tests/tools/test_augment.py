# SPDX-License-Identifier: Apache-2.0
"""The training augmentations (tools/mega_kws_tools/augment) on generated signals: noise and
babble levels, speed, formant and pitch changes, the phase vocoder, the front end's
filter warp and masks, mixup, and splicing half-keywords."""

import math
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mega_kws_tools import model as mt
from mega_kws_tools.augment import batch
from mega_kws_tools.augment import features
from mega_kws_tools.augment import noise as noise_mod
from mega_kws_tools.augment import speaker
from mega_kws_tools.augment import splice
from mega_kws_tools.data import dataset as dataset_mod
from mega_kws_tools.data import layout
from mega_kws_tools.training import losses
from mega_kws_tools.training import presets

SR = 16000


def vowel(formants=(700, 1200, 2600), f0=120, quiet_edges=True):
    """one second of a steady vowel: a 120 Hz pulse train through resonances at the formants"""
    hz = np.fft.rfftfreq(SR, 1 / SR)
    pulses = np.zeros(SR)
    pulses[(np.arange(0, SR, SR / f0)).astype(int)] = 1
    x = np.fft.irfft(np.fft.rfft(pulses) * sum(1 / (1 + ((hz - f) / 80) ** 2) for f in formants), SR)
    x = x.astype(np.float32)
    x *= 0.3 / np.abs(x).max()
    if quiet_edges:
        x[:2000] = x[-2000:] = 0
    return x


def test_babble_holds_3_to_7_words_at_its_snr():
    # clip c is a unit impulse at sample 100 * c: the babble shows which clips it holds
    class Fake:
        audio = np.zeros((50, SR), np.int16)
        for c in range(50):
            audio[c, 100 * c] = 16384
    ids = np.arange(10, 50)
    for seed in range(20):
        target = np.full(SR, 0.01, np.float32)
        noise_mod.add_babble(target, Fake, ids, np.random.default_rng(seed))
        noise = target - np.float32(0.01)
        hits = np.nonzero(np.abs(noise) > 1e-7)[0]
        assert noise_mod.BABBLE_WORDS[0] <= len(hits) <= noise_mod.BABBLE_WORDS[1], (seed, len(hits))  # rolls may coincide: rarely
        snr = 20 * np.log10(0.01 / np.sqrt(np.mean(noise.astype(np.float64) ** 2)))
        assert noise_mod.BABBLE_SNR_DB[0] - 0.01 <= snr <= noise_mod.BABBLE_SNR_DB[1] + 0.01, (seed, snr)
        peaks = np.sort(np.abs(noise[hits]))
        assert peaks[0] >= peaks[-1] * 10 ** (-6 / 20) - 1e-6, peaks  # each word within 6 dB of the others


def test_added_noise_sits_0_to_20_db_below_the_clip(dataset):
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    rng = np.random.default_rng(0)
    pools = noise_mod.noise_pools(ds)
    clean = ds.audio[np.nonzero(ds.y < 10)[0][0]].astype(np.float32) / 32768.0
    snrs = []
    for _ in range(60):
        x = clean.copy()
        noise_mod.add_noise(x, ds, pools, rng)
        p_noise = float(np.mean((x - clean) ** 2))
        if p_noise > 0:
            snrs.append(10 * np.log10(float(np.mean(clean ** 2)) / p_noise))
    assert len(snrs) > 30, f"noise added to only {len(snrs)} of 60 clips"
    assert -0.01 <= min(snrs) and max(snrs) <= 20.01, f"SNR {min(snrs):.1f} .. {max(snrs):.1f} dB"


def test_change_speed_scales_duration_and_pitch_and_keeps_the_centre():
    x = np.zeros(SR, np.float32)
    x[7000:9000] = np.sin(np.arange(2000) * 2 * np.pi * 440 / SR)
    for f in speaker.SPEED_RANGE + (1.0,):
        y = speaker.change_speed(x, f)
        on = np.nonzero(np.abs(y) > 1e-3)[0]
        dur, mid = on[-1] - on[0] + 1, (on[-1] + on[0]) / 2
        pitch = np.argmax(np.abs(np.fft.rfft(y))) * SR / len(y)
        assert len(y) == SR and y.dtype == np.float32
        assert abs(dur - 2000 / f) < 12 and abs(mid - 8000) < 8, (f, dur, mid)
        assert abs(pitch - 440 * f) < 2, (f, pitch)


def band_db(v, lo, hi):
    hz = np.fft.rfftfreq(SR, 1 / SR)
    p = np.abs(np.fft.rfft(v)) ** 2
    return 10 * np.log10(p[(hz >= lo) & (hz < hi)].sum() + 1e-12)


def test_recolor_moves_formants_and_keeps_pitch_timing_and_level():
    formants = (700, 1200, 2600)
    x = vowel(formants)

    def pitch(v):
        ac = np.correlate(v[4000:12000], v[4000:12000], "full")[7999:]
        return SR / (np.argmax(ac[40:400]) + 40)
    y = speaker.recolor(x, 1.0, 0.0)
    assert y.dtype == np.float32 and len(y) == SR and np.abs(y - x).max() < 1e-5, "recolor(1, 0) is not the identity"
    for a in speaker.FORMANT_RANGE:
        y = speaker.recolor(x, a, 0.0)
        assert len(y) == SR and abs(np.sqrt(np.mean(y * y)) / np.sqrt(np.mean(x * x)) - 1) < 1e-3
        assert abs(pitch(y) - pitch(x)) < 1, (a, pitch(x), pitch(y))
        assert np.abs(y[:1500]).max() < 1e-3 * np.abs(y).max(), "recolor smeared sound into the silence"
        for f in formants:
            # the energy near f now sits near a * f: the band around a * f gains, and
            # against the band around f by far more
            at_new = band_db(y, a * f - 60, a * f + 60) - band_db(x, a * f - 60, a * f + 60)
            at_old = band_db(y, f - 60, f + 60) - band_db(x, f - 60, f + 60)
            assert at_new > 5 and at_new - at_old > 10, (a, f, at_new, at_old)


def test_recolor_tilt_moves_energy_between_bands_as_asked():
    x = vowel()

    def f1_to_f3_db(v):
        return band_db(v, 2540, 2660) - band_db(v, 640, 760)
    for t in speaker.TILT_RANGE:
        y = speaker.recolor(x, 1.0, t)
        change = f1_to_f3_db(y) - f1_to_f3_db(x)
        assert abs(change - t * np.log2(2600 / 700)) < 1, (t, change)


def test_a_formant_track_moves_each_stretch_by_its_own_factor():
    hz = np.fft.rfftfreq(8000, 1 / SR)
    x = vowel((1200,), quiet_edges=False)
    count = speaker.color_frames(SR)
    assert np.array_equal(speaker.recolor(x, np.full(count, 1.1), 1.0), speaker.recolor(x, 1.1, 1.0)), \
        "a constant track is not the factor"
    track = np.where(np.arange(count) < count // 2, 0.9, 1.15)  # the first half down, the second up
    y = speaker.recolor(x, track, 0.0)

    def same_shape(a, b):  # equal up to a gain (recolor keeps the whole clip's RMS)
        g = np.dot(a, b) / np.dot(b, b)
        return np.abs(a - g * b).max() < 1e-3 * np.abs(a).max()
    # frames 8 ms apart, each 32 ms: samples before 7000 come from frames of the
    # first half only, samples after 9000 from the second half's
    assert same_shape(y[1000:7000], speaker.recolor(x, 0.9, 0.0)[1000:7000]), "the first half is not moved by 0.9"
    assert same_shape(y[9000:15000], speaker.recolor(x, 1.15, 0.0)[9000:15000]), "the second half is not moved by 1.15"
    assert not same_shape(y[9000:15000], speaker.recolor(x, 0.9, 0.0)[9000:15000])

    def peak(v):  # the formant: where the power, summed over one harmonic spacing, is highest
        p = np.abs(np.fft.rfft(v * np.hanning(len(v)), 8000)) ** 2
        band = (hz > 900) & (hz < 1500)
        return hz[band][np.argmax(np.convolve(p[band], np.ones(61), "same"))]
    first, second = peak(y[1000:7000]), peak(y[9000:15000])
    assert second - first > 200, (first, second)


def test_formant_tracks_stay_in_range_and_move():
    rng = np.random.default_rng(3)
    count = speaker.color_frames(SR)
    for _ in range(20):
        t = speaker.formant_track(SR, rng)
        assert len(t) == count and t.min() >= speaker.FORMANT_RANGE[0] - 1e-9 and t.max() <= speaker.FORMANT_RANGE[1] + 1e-9
        assert t.max() / t.min() > 1.02, "the track does not move"


def test_shift_pitch_moves_pitch_and_keeps_formants_timing_and_level():
    x = vowel()

    def pitch(v):
        ac = np.correlate(v[5000:11000], v[5000:11000], "full")[5999:]
        return SR / (np.argmax(ac[25:400]) + 25)

    def envelope_db(v):  # mean power in 200 Hz bands centred 200-3900 Hz, middle of the clip
        p = np.abs(np.fft.rfft(v[5000:11000] * np.hanning(6000))) ** 2
        f = np.fft.rfftfreq(6000, 1 / SR)
        return np.array([10 * np.log10(p[(f >= c - 100) & (f < c + 100)].mean() + 1e-12)
                         for c in range(200, 4000, 100)])
    y = speaker.shift_pitch(x, 1.0)
    assert y.dtype == np.float32 and len(y) == SR and np.abs(y - x).max() < 1e-4, "shift_pitch(1) is not the identity"
    for a in speaker.PITCH_RANGE + (1.3,):
        y = speaker.shift_pitch(x, a)
        assert len(y) == SR and abs(np.sqrt(np.mean(y * y)) / np.sqrt(np.mean(x * x)) - 1) < 1e-3
        assert abs(pitch(y) / (a * pitch(x)) - 1) < 0.03, (a, pitch(x), pitch(y))
        on = np.nonzero(np.abs(y) > 1e-3 * np.abs(y).max())[0]
        assert abs(on[0] - 2000) < 480 and abs(on[-1] - 14000) < 480, (a, on[0], on[-1])
        kept = np.abs(envelope_db(y) - envelope_db(x)).mean()
        moved = np.abs(envelope_db(speaker.change_speed(x, a)) - envelope_db(x)).mean()
        assert kept < 6 and kept < moved / 2, (a, kept, moved)


def stretch_loop(clip, factor):
    """the phase vocoder as a plain loop over output frames (what stretch does at once)"""
    frame, hop = speaker.PV_FRAME, speaker.PV_HOP
    padded = np.concatenate([np.zeros(frame), clip.astype(np.float64), np.zeros(frame + hop)])
    count = (len(padded) - frame) // hop + 1
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame)
    spec = np.fft.rfft(speaker.framed(padded, count, frame, hop) * win, axis=1)
    advance = 2 * np.pi * hop * np.arange(frame // 2 + 1) / frame
    steps = np.arange(int(np.ceil((count - 1) * factor)) + 1) / factor
    steps = steps[steps < count - 1]
    phase = np.angle(spec[0])
    out_frames = np.empty((len(steps), frame))
    bins = np.arange(frame // 2 + 1)
    for k, t in enumerate(steps):
        i, a = int(t), t - int(t)
        mag = (1 - a) * np.abs(spec[i]) + a * np.abs(spec[i + 1])
        inner = mag[1:-1]
        peaks = np.nonzero((inner > mag[:-2]) & (inner >= mag[2:]))[0] + 1
        if len(peaks):
            owner = peaks[np.searchsorted((peaks[:-1] + peaks[1:]) / 2, bins)]
            locked = phase[owner] + np.angle(spec[i]) - np.angle(spec[i])[owner]
        else:
            locked = phase
        out_frames[k] = np.fft.irfft(mag * np.exp(1j * locked), frame) * win
        d = np.angle(spec[i + 1]) - np.angle(spec[i]) - advance
        phase = locked + advance + d - 2 * np.pi * np.round(d / (2 * np.pi))
    out = speaker.overlap_add(out_frames) / 1.5
    start, m = int(round(frame * factor)), int(round(len(clip) * factor))
    return out[start:start + m]


def test_stretch_is_the_loop_over_frames_to_the_bit(dataset):
    # on word clips, a vowel, noise, silence (no spectral peaks) and a short clip
    rng = np.random.default_rng(5)
    ds = dataset_mod.Dataset(dataset, "kws12", "training")
    clips = [ds.audio[i].astype(np.float32) / 32768 for i in range(0, len(ds), 23)]
    clips += [vowel(), (rng.standard_normal(SR) * 0.1).astype(np.float32), np.zeros(SR, np.float32),
              np.zeros(300, np.float32)]
    for c in clips:
        for f in (speaker.PITCH_RANGE[0], 1.0, 1.37, speaker.PITCH_RANGE[1]):
            a, b = speaker.stretch(c, f), stretch_loop(c, f)
            assert a.shape == b.shape and np.array_equal(a, b), (len(c), f)


def smoke_model(preset="smoke"):
    return mt.MegaKWS(mt.MegaConfig(**presets.PRESETS[preset], n_classes=12, bidirectional=False))


def test_warp_moves_the_filters_and_leaves_evaluation_alone():
    torch.manual_seed(0)
    m = smoke_model()
    x = torch.randn(8, SR) * 0.1
    m.eval()
    ref = m.embed_tokens(x)
    features.SpeakerAugment(m, 1.0, 1.0, np.random.default_rng(0))
    assert torch.equal(m.embed_tokens(x), ref), "augmentation changed evaluation"
    m.train()
    assert not torch.allclose(m.embed_tokens(x), ref), "augmentation did nothing in training"
    w = m.embed_tokens.weight.detach()

    def peak_hz(v):
        return np.argmax(np.abs(np.fft.rfft(v.numpy(), SR)))
    for f in features.WARP_RANGE:
        j = w.shape[0] // 4
        assert abs(peak_hz(features.warp_filters(w, f)[j]) - f * peak_hz(w[j])) <= 0.02 * f * peak_hz(w[j]) + 5, f


@pytest.mark.parametrize("given", [None, (0.6, 0.7), (1.5, 1.9)])
def test_speed_factors_are_drawn_within_the_range_given(dataset, monkeypatch, given):
    ds = dataset_mod.Dataset(dataset, "kws12", "training")
    seen = []
    plain = speaker.change_speed
    monkeypatch.setattr(batch, "change_speed", lambda clip, f: (seen.append(f), plain(clip, f))[1])
    kw = {} if given is None else {"speed_range": given}
    batch.make_batch(ds, np.arange(min(len(ds), 40)), np.random.default_rng(3), train=True, speed_prob=1.0, **kw)
    lo, hi = given or speaker.SPEED_RANGE
    assert len(seen) >= 20 and lo <= min(seen) and max(seen) <= hi, (given, seen)
    assert max(seen) - min(seen) > 0.5 * (hi - lo), (given, seen)  # spread over the range


@pytest.mark.parametrize("given", [None, (0.6, 0.7), (1.5, 1.9)])
def test_warp_factors_are_drawn_within_the_range_given(given):
    m = smoke_model().train()
    aug = features.SpeakerAugment(m, 1.0, 0.0, np.random.default_rng(1), *([given] if given else []))
    factors = []
    aug.embed = lambda s, f: (factors.append(f), aug.plain(s))[1]
    for _ in range(10):
        m.embed_tokens(torch.randn(8, SR) * 0.1)
    lo, hi = given or features.WARP_RANGE
    assert len(factors) == 10 * aug.GROUPS and lo <= min(factors) and max(factors) <= hi, (given, factors)
    assert max(factors) - min(factors) > 0.5 * (hi - lo), (given, factors)


def test_log_mel_bands_hold_a_tone_where_it_belongs_also_warped():
    cfg = mt.MegaConfig(**presets.PRESETS["demo-wide-mel"], n_classes=12, bidirectional=False)
    emb = mt.MegaKWS(cfg).embed_tokens
    bands = emb.bands
    assert bands.shape[0] == 40 and bool((bands.sum(1) > 0).all()) and float(bands.min()) >= 0
    hz = torch.tensor([f for _, f in mt.mel_bins(400)])
    centre = [float(hz[int(torch.argmax(r))]) for r in bands]
    assert centre == sorted(centre) and centre[0] < 150 and centre[-1] > 6500, centre
    t = torch.arange(SR) / float(SR)
    for f in (300.0, 1000.0, 2500.0, 6000.0):
        for factor in (1.0, 0.9, 1.12):
            w = emb.weight if factor == 1.0 else features.warp_filters(emb.weight, factor)
            lm = emb.log_power(0.1 * torch.sin(2 * math.pi * f * t).unsqueeze(0), w)[0, 10:-10].mean(0)
            top = centre[int(torch.argmax(lm))]
            # the warped front end sees the tone at f / factor
            assert abs(math.log(top / (f / factor))) < 0.12, (f, factor, top)
            assert float(lm.max() - lm.min()) > 6, (f, factor)  # far bands are far below the tone's


def test_log_mel_masks_fall_on_the_bands_in_training_only():
    torch.manual_seed(0)
    m = smoke_model("smoke-mel")
    x = torch.randn(8, SR) * 0.1
    m.eval()
    ref = m.embed_tokens(x)
    aug = features.SpeakerAugment(m, 0.0, 1.0, np.random.default_rng(0))
    assert torch.equal(m.embed_tokens(x), ref), "augmentation changed evaluation"
    masked = aug.mask(m.embed_tokens.log_power(x))
    assert masked.shape == (8, 100, 16) and not torch.equal(masked, m.embed_tokens.log_power(x))
    m.train()
    assert not torch.allclose(m.embed_tokens(x), ref), "augmentation did nothing in training"


def test_mixup_mixes_pairs_of_a_permutation():
    x, y = torch.eye(64), torch.arange(64) % 12  # clip i is the unit vector i: a mix shows its two parts
    same, py, lam = losses.mixup(x, y, np.random.default_rng(0), 0.0, 0.4)
    assert torch.equal(same, x) and torch.all(lam == 1), "probability 0 mixed clips"
    mixed, py, lam = losses.mixup(x, y, np.random.default_rng(1), 1.0, 0.4)
    assert torch.all((lam >= 0.5) & (lam <= 1)) and (lam < 0.999).sum() > 40, lam
    partners = set()
    for i in range(64):  # row i: lam of clip i, 1 - lam of one partner j, whose label is py[i]
        rest = mixed[i].clone()
        rest[i] -= lam[i]
        j = int(torch.argmax(rest)) if rest.abs().sum() > 1e-6 else i
        partners.add(j)
        assert torch.allclose(mixed[i], lam[i] * x[i] + (1 - lam[i]) * x[j], atol=1e-6) and py[i] == y[j], i
    assert len(partners) == 64, "the pairing is not a permutation"
    _, _, lam_half = losses.mixup(x, y, np.random.default_rng(2), 0.5, 0.4)
    share = float((lam_half < 1).float().mean())
    assert 0.25 < share < 0.75, share


def test_mixup_loss_is_the_same_mix_of_the_two_cross_entropies():
    torch.manual_seed(0)
    y = torch.arange(64) % 12
    py = torch.randint(0, 12, (64,))
    logits = torch.randn(64, 12)
    ce = F.cross_entropy(logits, y, reduction="none")
    assert torch.allclose(losses.mixup_loss(logits, y, py, torch.ones(64), 0.0), ce.mean())
    both = 0.5 * ce + 0.5 * F.cross_entropy(logits, py, reduction="none")
    assert torch.allclose(losses.mixup_loss(logits, y, py, torch.full((64,), 0.5), 0.0), both.mean())
    assert losses.mixup_loss(logits, y, py, torch.ones(64), 0.1) != losses.mixup_loss(logits, y, py, torch.ones(64), 0.0)


def test_splice_pair_keeps_the_keywords_half_and_matches_levels():
    t = np.arange(SR) / SR
    kw = np.zeros(SR, np.float32)
    kw[4000:10000] = 0.5 * np.sin(2 * np.pi * 300 * t[:6000])
    other = np.zeros(SR, np.float32)
    other[2000:12000] = 0.05 * np.sin(2 * np.pi * 900 * t[:10000])
    rng = np.random.default_rng(0)
    for keep_onset in (True, False):
        y = splice.splice_pair(kw, other, keep_onset, rng)
        on = np.nonzero(np.abs(y) > 1e-6)[0]
        part = y[on[0]:on[-1] + 1]
        n = len(part)
        assert len(y) == SR and 0.35 * 6000 + 0.35 * 10000 - 200 <= n <= 0.65 * 6000 + 0.65 * 10000 + 200, n
        spec = np.abs(np.fft.rfft(part[:n // 4] if keep_onset else part[-n // 4:], SR))
        assert np.argmax(spec) in range(295, 306), "the keyword's part is not where it belongs"
        a, b = (part[:n // 3], part[-n // 3:]) if keep_onset else (part[-n // 3:], part[:n // 3])
        assert abs(np.sqrt(np.mean(b * b)) / np.sqrt(np.mean(a * a)) - 1) < 0.1, "levels not matched"
    assert splice.splice_pair(kw, np.zeros(SR, np.float32), True, rng) is None


def word_of(path):
    return os.path.basename(os.path.dirname(path))


def test_splice_pools_keep_to_the_voice_and_out_of_the_avoided_words(dataset):
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    u = ds.labels.index("_unknown_")
    words = {word_of(p) for p in ds.paths}
    assert all(v.count(":") == 1 for v in ds.voice[:len(ds.paths)]), "voices not read from manifest.csv"
    same = other = 0
    for k, keyword in enumerate(layout.KEYWORDS):
        for j in np.nonzero(ds.y == k)[0]:
            pool = splice.splice_pool(ds, keyword, j)
            got = {word_of(ds.paths[i]) for i in pool}
            assert len(pool) and all(ds.y[i] == u for i in pool) and not got & splice.SPLICE_AVOID[keyword], keyword
            # the same voice (and variant) when it has other words, else anything of the source
            mine = [i for i in np.nonzero(ds.y == u)[0] if ds.voice[i] == ds.voice[j]
                    and word_of(ds.paths[i]) not in splice.SPLICE_AVOID[keyword]]
            if mine:
                assert all(ds.voice[i] == ds.voice[j] for i in pool), (keyword, j)
                same += 1
            else:
                assert got == words - set(layout.KEYWORDS) - {"_silence_"} - splice.SPLICE_AVOID[keyword], keyword
                other += 1
    assert same and other, "a kind of splice pool was not seen"


def test_splice_pools_follow_extend(dataset):
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    kw, j = next((layout.KEYWORDS[ds.y[i]], int(i)) for i in np.nonzero(ds.y < 10)[0]  # a pool of its voice
                 if all(ds.voice[o] == ds.voice[i] for o in splice.splice_pool(ds, layout.KEYWORDS[ds.y[i]], i)))
    before = len(splice.splice_pool(ds, kw, j))
    ds.extend(dataset_mod.Dataset(dataset, "kws12", "training", 0, 1))
    assert len(splice.splice_pool(ds, kw, j)) == 2 * before, "stale splice pools after extend()"


def test_speech_commands_names_give_the_speaker():
    speaker = dataset_mod.clip_voices("/x", ["/x/yes/0a1b2c3d_nohash_2.wav", "/x/bed/other.wav"])
    assert list(speaker[0]) == ["speaker:0a1b2c3d", ""] and list(speaker[1]) == ["speaker:0a1b2c3d", ""], speaker


def test_splice_prob_makes_unknown_clips_and_0_changes_nothing(dataset):
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    u = ds.labels.index("_unknown_")
    idx = np.nonzero(ds.y < 10)[0][:16]
    x0, y0 = batch.make_batch(ds, idx, np.random.default_rng(1), True)
    x1, y1 = batch.make_batch(ds, idx, np.random.default_rng(1), True, splice_prob=0.0)
    assert (x0 == x1).all() and (y0 == y1).all()
    _, ys = batch.make_batch(ds, idx, np.random.default_rng(1), True, splice_prob=1.0)
    assert (ys == u).all() and (y0 < 10).all(), ys

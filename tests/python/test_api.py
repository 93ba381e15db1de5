#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Python package (python/mega_kws) over the build tree's libmega_kws:
the same results as keyword_spotter classify and scan, NumPy in and out, and
bad input (wrong dtype, NaN, a file that is not a model) giving clear
exceptions that carry the C status and message, never a crash. Also: the
package installs with pip (no build isolation, no index) into a venv of
Debian's Python and works from there.

Run by ctest (test python_api) with MEGA_KWS_LIBRARY and MEGA_KWS_CLI set;
by hand: /usr/bin/python3 -m pytest tests/python/test_api.py (defaults: build/)."""

import csv
import json
import os
import shutil
import subprocess
import sys
import wave

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # tests/tools/ -> the root
FIX = os.path.join(ROOT, "tests", "fixtures", "data")
SAMPLES = os.path.join(ROOT, "samples")
DEMO = os.path.join(ROOT, "models", "sc10-demo.mega")
os.environ.setdefault("MEGA_KWS_LIBRARY", os.path.join(ROOT, "build", "libmega_kws.so"))
CLI = os.environ.get("MEGA_KWS_CLI", os.path.join(ROOT, "build", "keyword_spotter"))

import mega_kws  # noqa: E402
from mega_kws import MegaError, Status  # noqa: E402

COMMANDS = os.path.join(SAMPLES, "commands.wav")
CLIPS = sorted(os.path.join(SAMPLES, f) for f in os.listdir(SAMPLES) if f.endswith(".wav"))


def run(*args, env=None, check=True, cwd=None):
    r = subprocess.run(list(args), capture_output=True, text=True, env=env, cwd=cwd)
    if check:
        assert r.returncode == 0, f"{args}: rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def py_cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
    return run(sys.executable, "-m", "mega_kws", *args, env=env, **kw)


@pytest.fixture(scope="module")
def demo():
    return mega_kws.Model(DEMO)


def write_wav(path, x, rate=16000, channels=1, width=2):
    """x: float frames (n,) or (n, channels) in [-1, 1] as integer PCM of `width` bytes."""
    x = np.asarray(x, np.float64).reshape(-1, channels)
    if width == 1:
        raw = np.clip(np.round(x * 127 + 128), 0, 255).astype(np.uint8).tobytes()
    elif width == 3:
        v = np.clip(np.round(x * 8388607), -8388608, 8388607).astype("<i4")
        raw = v.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
    else:
        raw = np.clip(np.round(x * 32767), -32768, 32767).astype("<i2").tobytes()
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(raw)


def write_float_wav(path, x, rate=16000):
    """IEEE float 32-bit, mono (the wave module writes integer PCM only)."""
    data = np.asarray(x, "<f4").tobytes()
    fmt = (b"fmt " + (18).to_bytes(4, "little") + (3).to_bytes(2, "little") + (1).to_bytes(2, "little")
           + rate.to_bytes(4, "little") + (rate * 4).to_bytes(4, "little") + (4).to_bytes(2, "little")
           + (32).to_bytes(2, "little") + (0).to_bytes(2, "little"))
    body = b"WAVE" + fmt + b"data" + len(data).to_bytes(4, "little") + data
    with open(path, "wb") as f:
        f.write(b"RIFF" + len(body).to_bytes(4, "little") + body)


def speechlike(n, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 16000.0
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t) + 0.05 * rng.standard_normal(n)).clip(-1, 1)


# ---- the same output as keyword_spotter ----

def test_classify_matches_the_cli_on_the_samples(demo):
    want = run(CLI, "classify", "-m", DEMO, "--json", *CLIPS).stdout
    assert py_cli("classify", "-m", DEMO, "--json", *CLIPS).stdout == want
    assert py_cli("classify", "-m", DEMO, *CLIPS).stdout == run(CLI, "classify", "-m", DEMO, *CLIPS).stdout
    for line, path in zip(want.splitlines(), CLIPS):
        cli = json.loads(line)
        r = mega_kws.classify_file(path, demo)
        assert (r.label, round(r.score, 6), round(r.duration_s, 3), r.window_start_s, r.padded) == \
            (cli["label"], cli["score"], cli["duration_s"], cli["window_start_s"], cli["padded"])
        assert r.logits.dtype == np.float32 and r.logits.shape == (12,)
        np.testing.assert_allclose(r.logits, cli["logits"], rtol=1e-6, atol=1e-6)
    assert mega_kws.classify_file(os.path.join(SAMPLES, "stop.wav"), DEMO).label == "stop"


@pytest.mark.parametrize("flags", [[], ["--sensitivity", "0.8", "--smoothing", "3"],
                                   ["--threshold", "0.6", "--refractory-ms", "0"], ["--json"],
                                   ["--sensitivity", "0.8", "--threshold", "go=1.0,left=0.5"]])
def test_scan_matches_the_cli(flags):
    cli = run(CLI, "scan", "-m", DEMO, *flags, COMMANDS)
    py = py_cli("scan", "-m", DEMO, *flags, COMMANDS)
    assert py.stdout == cli.stdout
    assert py.stderr == cli.stderr  # "scanned 12.352 s: N detection(s)"
    # the model's own defaults are strict (some of the five words); lowered, all five
    lowered = "--sensitivity" in flags or "--threshold" in flags
    assert len(py.stdout.splitlines()) >= (5 if lowered else 1)


def test_json_file_names_as_the_cli_writes_them(tmp_path):
    """--json with a name that is not UTF-8 (U+FFFD and "file_hex"), a control character and DEL in another,
    scan's detections and summary: python -m mega_kws writes the same bytes."""
    odd = os.fsencode(str(tmp_path)) + b"/yes\xff\xe2\x82.wav"
    ctl = str(tmp_path / "no\x01\x7f\b.wav")
    shutil.copy(os.path.join(SAMPLES, "yes.wav"), odd)
    shutil.copy(os.path.join(SAMPLES, "no.wav"), ctl)
    for args in (["classify", "-m", DEMO, "--json", odd, ctl],
                 ["scan", "-m", DEMO, "--json", "--threshold", "0.01", odd], ["scan", "-m", DEMO, "--json", ctl]):
        cli = run(CLI, *args, check=False)
        if odd in args:
            assert f'"file_hex": "{odd.hex()}"' in cli.stdout, cli.stdout
        if ctl in args:
            assert "no\\u0001\\u007f\\b.wav" in cli.stdout, cli.stdout
        assert py_cli(*args, check=False).stdout == cli.stdout, args


def test_scan_file_finds_the_five_words(demo):
    found, seconds = mega_kws.scan_file(COMMANDS, demo, sensitivity=0.8)
    # the five spoken words of samples/commands.csv, in order, each within one
    # hop (250 ms) of the word's end, as tests/apps/test_cli.sh checks the CLI (at
    # --sensitivity 0.8: the model's defaults are stricter)
    with open(os.path.join(SAMPLES, "commands.csv")) as f:
        words = list(csv.DictReader(f))
    assert [d.label for d in found] == [w["label"] for w in words]
    for d, w in zip(found, words):
        assert abs(d.time_s - float(w["offset_s"])) <= 0.25 + 1e-6, (d, w)
    assert seconds == pytest.approx(12.352, abs=1e-3)
    floor = float(mega_kws.Detector(demo, sensitivity=0.8).thresholds.min())
    assert all(isinstance(d, mega_kws.Detection) and floor <= d.score <= 1.0 for d in found)
    assert [d.label_index for d in found] == [demo.labels.index(d.label) for d in found]


def test_a_word_that_ends_the_file_is_detected(tmp_path, demo):
    # flite's "go" fills only the last hop or two of a 0.68 s file: the flush
    # must complete the chunk and the smoothing (mega_session_detect_flush)
    if not (shutil.which("flite") and shutil.which("sox")):
        pytest.fail("flite or sox is not installed (scripts/setup.sh installs them)")
    path = str(tmp_path / "go.wav")
    subprocess.run(["flite", "-t", "go", "-o", str(tmp_path / "go8k.wav")], check=True)  # 8 kHz
    subprocess.run(["sox", str(tmp_path / "go8k.wav"), "-r", "16000", path], check=True)
    found, _ = mega_kws.scan_file(path, demo)
    assert [d.label for d in found] == ["go"]


def test_wav_encodings_read_as_the_cli_reads_them(tmp_path):
    """8-, 16-, 24-bit PCM, stereo (mixed down) and float WAVs: the same logits
    as keyword_spotter's libsndfile reader gives."""
    x = speechlike(24000)
    files = {"pcm8.wav": dict(width=1), "pcm16.wav": {}, "pcm24.wav": dict(width=3),
             "stereo.wav": dict(channels=2)}
    paths = []
    for name, kw in files.items():
        p = str(tmp_path / name)
        frames = np.stack([x, -0.5 * x], axis=1) if kw.get("channels") == 2 else x
        write_wav(p, frames, **kw)
        paths.append(p)
    p = str(tmp_path / "float.wav")
    write_float_wav(p, x)
    paths.append(p)
    for model in (DEMO, os.path.join(FIX, "tiny_uni.mega"), os.path.join(FIX, "tiny_bi.mega")):
        clips = paths if "tiny_bi" not in model else [str(tmp_path / "short.wav")]
        if "tiny_bi" in model:  # bidirectional: sliding windows, 30 s at most; keep it short
            write_wav(clips[0], x[:1600])
        assert py_cli("classify", "-m", model, "--json", *clips).stdout == \
            run(CLI, "classify", "-m", model, "--json", *clips).stdout, model


# ---- NumPy in and out ----

def test_the_reference_backend_gives_the_cpu_backends_detections(demo):
    # issue 81 item 2: the scalar kernels as a backend of their own, by name
    x, _, _ = mega_kws.read_wav(COMMANDS)
    ref = mega_kws.Session(demo, backend="reference")
    assert ref.backend == "reference"
    logits = ref.push(x[:40000])
    np.testing.assert_allclose(logits, mega_kws.Session(demo).push(x[:40000]), atol=1e-3)

def test_session_push_gives_the_window_logits_of_every_chunk(demo):
    x, rate, _ = mega_kws.read_wav(COMMANDS)
    assert x.dtype == np.float32 and rate == 16000
    s = mega_kws.Session(demo, backend="cpu", threads=1)
    assert s.backend == "cpu"
    whole = s.push(x)
    assert whole.dtype == np.float32 and whole.shape == (len(x) // demo.chunk_samples, 12)
    for block in (1, 1600, 3999, 4001):
        s.reset()
        head = x[:40000] if block == 1 else x
        parts = [s.push(head[i:i + block]) for i in range(0, len(head), block)]
        got = np.concatenate(parts)
        np.testing.assert_array_equal(got, whole[:len(got)])  # bit-identical whatever the block size
        assert sum(len(p) for p in parts) == len(head) // demo.chunk_samples
    assert s.push(np.zeros(0, np.float32)).shape == (0, 12)
    two = mega_kws.Session(demo, threads=2)
    np.testing.assert_array_equal(two.push(x), whole)
    # the best window of the recording (classify_file) is one of these rows
    best = mega_kws.classify_file(COMMANDS, demo)
    row = int(round((best.window_start_s * 16000 + demo.window_samples) / demo.chunk_samples)) - 1
    np.testing.assert_array_equal(whole[row], best.logits)


def test_detector_update_equals_detect(demo):
    x, _, _ = mega_kws.read_wav(COMMANDS)
    x = np.concatenate([x, np.zeros((-len(x)) % demo.chunk_samples, np.float32)])
    s = mega_kws.Session(demo)
    d = mega_kws.Detector(demo, sensitivity=0.8)
    by_update = d.update(s.push(x))
    s.reset()
    d.reset()
    by_detect = d.detect(s, x) + d.flush(s)
    assert by_update == by_detect
    assert [e.label for e in by_detect] == ["yes", "stop", "go", "left", "no"]
    d.reset()
    assert d.update(np.zeros(12, np.float32)) == []  # one hop, a flat posterior: nothing



def test_the_start_of_a_stream_does_not_fire_alone(demo):
    """Issue 85 item 2: a 440 Hz tone read "go" in its first hop; a keyword at
    the very start of a recording is still found."""
    t = np.arange(10 * demo.sample_rate) / demo.sample_rate
    tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    s = mega_kws.Session(demo)
    d = mega_kws.Detector(demo)
    assert d.detect(s, tone) + d.flush(s) == []
    x, _, _ = mega_kws.read_wav(os.path.join(SAMPLES, "stop.wav"))
    s.reset()
    d.reset()
    found = d.detect(s, np.concatenate([x, np.zeros(5 * demo.sample_rate, np.float32)])) + d.flush(s)
    assert [e.label for e in found] == ["stop"]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_logits_are_refused_and_feed_nothing(demo, bad):
    """Issue 85 item 7: a NaN or an infinity in any row is a ValueError, and no
    row of that call was fed: the detector goes on as if it had not been made."""
    x, _, _ = mega_kws.read_wav(COMMANDS)
    s = mega_kws.Session(demo)
    logits = s.push(np.concatenate([x, np.zeros((-len(x)) % demo.chunk_samples, np.float32)]))
    want = mega_kws.Detector(demo, sensitivity=0.8).update(logits)
    d = mega_kws.Detector(demo, sensitivity=0.8)
    dirty = logits.copy()
    dirty[7, 3] = bad
    with pytest.raises(ValueError, match="hop 7 .*not all finite"):
        d.update(dirty)
    with pytest.raises(mega_kws.InvalidArgumentError):
        d.update(dirty[7])
    assert d.update(logits) == want

def test_detector_overrides_and_settings(demo):
    d = mega_kws.Detector(demo)
    assert d.thresholds.dtype == np.float32 and d.thresholds.shape == (12,)
    assert d.smoothing >= 1 and d.refractory_ms >= 0
    o = mega_kws.Detector(demo, threshold=0.9, sensitivity=0.8, smoothing=3, refractory_ms=0)
    np.testing.assert_allclose(o.thresholds, 0.6, rtol=1e-6)
    assert (o.smoothing, o.refractory_ms) == (3, 0)
    per = np.linspace(0.1, 0.9, 12)
    np.testing.assert_allclose(mega_kws.Detector(demo, thresholds=per).thresholds, per, rtol=1e-6)


def test_float64_and_lists_are_converted(demo):
    x, _, _ = mega_kws.read_wav(os.path.join(SAMPLES, "yes.wav"))
    s = mega_kws.Session(demo)
    want = s.classify(x)
    np.testing.assert_array_equal(s.classify(x.astype(np.float64)), want)
    np.testing.assert_array_equal(s.classify(list(map(float, x))), want)
    np.testing.assert_array_equal(s.classify(x[::-1].copy()[::-1]), want)  # a strided view


# ---- bad input: clear exceptions, never a crash ----

@pytest.mark.parametrize("bad", [np.zeros(100, np.int16), np.zeros(100, np.int32), np.zeros(100, np.uint8),
                                 np.zeros(100, bool), np.zeros(100, np.complex64), ["a", "b"], [0, 1, 2]])
def test_wrong_dtype_is_a_type_error(demo, bad):
    s = mega_kws.Session(demo)
    d = mega_kws.Detector(demo)
    for call in (s.push, s.classify, lambda x: d.detect(s, x)):
        with pytest.raises(TypeError) as e:
            call(bad)
        assert "float" in str(e.value)
    if np.asarray(bad).dtype == np.int16:
        assert "32768" in str(e.value)  # the explicit conversion is spelled out


def test_wrong_shape_is_a_value_error(demo):
    s = mega_kws.Session(demo)
    with pytest.raises(ValueError, match="1-D"):
        s.push(np.zeros((2, 100), np.float32))
    with pytest.raises(ValueError, match="1-D"):
        s.classify(np.float32(0.5))
    with pytest.raises(ValueError, match=r"shape \(12,\)"):
        mega_kws.Detector(demo).update(np.zeros(11, np.float32))
    with pytest.raises(TypeError):
        mega_kws.Detector(demo).update(np.zeros(12, np.int64))


def test_nan_samples_are_replaced_and_counted(demo):
    x, _, _ = mega_kws.read_wav(COMMANDS)
    dirty = x.copy()
    bad = [0, 5, 4000, 4001, 77777]
    dirty[bad[:3]] = np.nan
    dirty[bad[3]] = np.inf
    dirty[bad[4]] = -np.inf
    clean = x.copy()
    clean[bad] = 0.0
    a, b = mega_kws.Session(demo), mega_kws.Session(demo)
    got, want = a.push(dirty), b.push(clean)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got, want)
    assert a.stats == {"n_nonfinite_samples": 5, "n_clamped_samples": 0, "n_state_resets": 0}
    loud = mega_kws.Session(demo)
    loud.push(np.full(1000, 3.0))
    assert loud.stats["n_clamped_samples"] == 1000
    assert mega_kws.Detector(demo).detect(mega_kws.Session(demo), np.full(50000, np.nan, np.float32)) == []


def test_a_file_that_is_not_a_model(tmp_path):
    with pytest.raises(MegaError) as e:
        mega_kws.Model(os.path.join(ROOT, "README.md"))
    assert e.value.status == Status.BAD_MODEL
    assert "not a .mega model file" in e.value.message and "README.md" in e.value.message
    assert "BAD_MODEL" in str(e.value)
    junk = tmp_path / "junk.mega"
    junk.write_bytes(b"garbage")
    with pytest.raises(MegaError) as e:
        mega_kws.Model(junk)
    assert e.value.status == Status.BAD_MODEL and "too small" in e.value.message
    for name, status in (("bad_wrong_shape.mega", Status.BAD_MODEL), ("bad_nan_weight.mega", Status.BAD_MODEL),
                         ("bad_schema_newer.mega", Status.UNSUPPORTED_MODEL)):
        with pytest.raises(MegaError) as e:
            mega_kws.Model(os.path.join(FIX, name))
        assert e.value.status == status, name
        assert len(e.value.message) > len(name) + 10
    with pytest.raises(MegaError) as e:
        mega_kws.Model(tmp_path / "missing.mega")
    assert e.value.status == Status.IO and "cannot open" in e.value.message
    with pytest.raises(MegaError) as e:
        mega_kws.Model(tmp_path)
    assert e.value.status == Status.IO
    r = py_cli("scan", "-m", str(junk), COMMANDS, check=False)
    assert r.returncode == 3 and "too small" in r.stderr and "Traceback" not in r.stderr


def test_bad_options_carry_the_status_and_reason(demo):
    for kw, why in ((dict(threshold=0.0), "threshold"), (dict(threshold=1.5), "threshold"),
                    (dict(threshold=float("nan")), "threshold"), (dict(thresholds=[0.5] * 11), "need 12 thresholds"),
                    (dict(thresholds=[0.5] * 12, threshold=0.5), "not both"), (dict(smoothing=0), "smoothing"),
                    (dict(refractory_ms=10 ** 6), "refractory"), (dict(sensitivity=2.0), "sensitivity")):
        with pytest.raises(MegaError) as e:
            mega_kws.Detector(demo, **kw)
        assert e.value.status == Status.INVALID_ARGUMENT and why in e.value.message, kw
    with pytest.raises(MegaError) as e:
        mega_kws.Session(demo, backend="tpu")
    assert e.value.status == Status.INVALID_ARGUMENT and "unknown backend 'tpu'" in e.value.message
    with pytest.raises(MegaError) as e:
        mega_kws.Session(demo, threads=0)
    assert e.value.status == Status.INVALID_ARGUMENT
    r = py_cli("scan", "-m", DEMO, "--sensitivity", "3", COMMANDS, check=False)
    assert r.returncode == 2 and "sensitivity" in r.stderr and "Traceback" not in r.stderr


def test_a_bidirectional_model_does_not_stream():
    m = mega_kws.Model(os.path.join(FIX, "tiny_bi.mega"))
    assert not m.streamable
    s = mega_kws.Session(m)
    with pytest.raises(MegaError) as e:
        s.push(np.zeros(100, np.float32))
    assert e.value.status == Status.NOT_STREAMABLE
    assert s.classify(np.zeros(40, np.float32)).shape == (4,)
    assert s.self_test() < 1e-3


def test_misuse_is_an_exception(demo):
    tiny = mega_kws.Model(os.path.join(FIX, "tiny_uni.mega"))
    with pytest.raises(MegaError) as e:  # a detector for other labels
        mega_kws.Detector(demo).detect(mega_kws.Session(tiny), np.zeros(100, np.float32))
    assert e.value.status == Status.INVALID_ARGUMENT
    s = mega_kws.Session(tiny)
    s.close()
    with pytest.raises(MegaError) as e:  # a closed session
        s.push(np.zeros(10, np.float32))
    assert e.value.status == Status.INVALID_ARGUMENT
    d = mega_kws.Detector(tiny)
    tiny.close()  # the detector keeps what it needs; new objects need an open model
    assert d.update(np.zeros((3, 4), np.float32)) == []
    with pytest.raises(ValueError, match="closed"):
        mega_kws.Session(tiny)


def test_audio_files_that_cannot_be_read(tmp_path, demo):
    with pytest.raises(FileNotFoundError):
        mega_kws.classify_file(tmp_path / "missing.wav", demo)
    with pytest.raises(ValueError, match="not a WAV"):
        mega_kws.classify_file(os.path.join(ROOT, "README.md"), demo)
    p = str(tmp_path / "44k.wav")
    write_wav(p, speechlike(4410), rate=44100)
    with pytest.raises(ValueError, match="resample"):
        mega_kws.classify_file(p, demo)
    p = str(tmp_path / "nan.wav")
    write_float_wav(p, np.array([0.1, np.nan, 0.2] * 1000, np.float32))
    with pytest.raises(ValueError, match="not a finite number"):
        mega_kws.scan_file(p, demo)
    r = py_cli("classify", "-m", DEMO, p, os.path.join(SAMPLES, "yes.wav"), check=False)
    assert r.returncode == 1 and "yes" in r.stdout and "not a finite number" in r.stderr
    truncated = tmp_path / "truncated.wav"
    truncated.write_bytes(open(os.path.join(SAMPLES, "yes.wav"), "rb").read()[:20000])
    with pytest.raises(ValueError, match="truncated"):
        mega_kws.classify_file(truncated, demo)


def test_the_library_is_found_or_the_error_says_where_it_looked(tmp_path):
    assert os.path.samefile(mega_kws.library_path(), os.environ["MEGA_KWS_LIBRARY"])
    env = dict(os.environ, MEGA_KWS_LIBRARY=str(tmp_path / "nowhere.so"), PYTHONPATH=os.path.join(ROOT, "python"))
    r = run(sys.executable, "-c", "import mega_kws; mega_kws.Model('x')", env=env, check=False)
    assert r.returncode == 1 and "cannot load libmega_kws" in r.stderr and "nowhere.so" in r.stderr


# ---- installing it with pip ----

def test_pip_install_into_a_venv(tmp_path):
    """pip install --no-build-isolation (setuptools and numpy from Debian, no
    index) into a venv of Debian's Python; then python -m mega_kws scan there."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "_config.py",
                                                                                     "build", "*.egg-info"))
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--system-site-packages", str(venv))
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run(py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--quiet", str(src), env=env)
    r = run(py, "-c", "import mega_kws, sys; print(mega_kws.__file__); print(mega_kws.__version__)", env=env)
    assert r.stdout.startswith(str(venv))
    assert r.stdout.splitlines()[1] == _pyproject_version()  # from the installed distribution's metadata
    scan = run(py, "-m", "mega_kws", "scan", "-m", DEMO, COMMANDS, env=env)
    assert scan.stdout == run(CLI, "scan", "-m", DEMO, COMMANDS).stdout


def test_the_readme_example(tmp_path):
    """The README's ten-line Python example, as printed there, prints what scan prints."""
    text = open(os.path.join(ROOT, "README.md")).read()
    block = text.split("<!-- example: python -->\n```python\n", 1)[1].split("```", 1)[0]
    assert 8 <= len(block.splitlines()) <= 12
    script = tmp_path / "example.py"
    script.write_text(block)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
    out = run(sys.executable, str(script), DEMO, COMMANDS, env=env).stdout
    assert out == run(CLI, "scan", "-m", DEMO, COMMANDS).stdout
    assert len(out.splitlines()) >= 1  # the model's strict defaults: some of the five words
    # it checks the rate: a recording at 44.1 kHz is refused, not scanned as if it were 16 kHz
    other = str(tmp_path / "44k.wav")
    write_wav(other, speechlike(44100), rate=44100)
    r = run(sys.executable, str(script), DEMO, other, env=env, check=False)
    assert r.returncode == 1 and r.stdout == "" and "audio at 44100 Hz, the model takes 16000 Hz" in r.stderr


# ---- threads: close() while another thread is inside a call (issue 72) ----

RACE = r"""
import sys, threading, time
import numpy as np
import mega_kws
what = sys.argv[1]
model = mega_kws.Model(sys.argv[2])
session = mega_kws.Session(model)
detector = mega_kws.Detector(model)
x = np.zeros(16000 * 600, np.float32)  # ten minutes: seconds of work
calls = {"push": lambda: session.push(x), "detect": lambda: detector.detect(session, x),
         "classify": lambda: session.classify(x)}
closes = {"session": session.close, "detector": detector.close, "model": model.close}
call, victim = what.split("/")
outcome = []
def work():
    try:
        calls[call]()
        outcome.append("completed")
    except mega_kws.InvalidArgumentError as e:
        outcome.append("stopped: " + str(e))
t = threading.Thread(target=work)
t.start()
time.sleep(0.2)
in_flight = t.is_alive()
closes[victim]()
t.join()
print("in flight" if in_flight else "done before close", outcome[0], sep="\n")
"""


@pytest.mark.parametrize("what", ["push/session", "detect/session", "detect/detector", "classify/session",
                                  "push/model", "detect/model"])
def test_close_from_another_thread_waits_for_the_call(what):
    """Session.close() while another thread is inside push() used to free the
    native session under it (SIGSEGV). Now close() waits: a long push or
    detect stops at the next chunk with an error naming the close, a single
    native call (classify) completes; a closed Model's sessions keep working."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
    r = run(sys.executable, "-c", RACE, what, DEMO, env=env, check=False)
    assert r.returncode == 0, f"{what}: rc {r.returncode} (-11: a segfault)\n{r.stdout}\n{r.stderr}"
    in_flight, outcome = r.stdout.splitlines()
    call, victim = what.split("/")
    if in_flight == "in flight" and call != "classify" and victim != "model":
        assert outcome.startswith("stopped: ") and f"the {victim} was closed" in outcome, outcome
    else:
        assert outcome == "completed", outcome


def test_calls_on_one_object_from_two_threads_are_serialized(demo):
    """Two threads pushing into one session (the C API allows one at a time):
    the chunks go in one call after the other, as one stream."""
    import threading
    x, _, _ = mega_kws.read_wav(COMMANDS)
    x = x[:len(x) // demo.chunk_samples * demo.chunk_samples]
    half = len(x) // demo.chunk_samples // 2 * demo.chunk_samples
    s = mega_kws.Session(demo)
    want = s.push(x)
    s.reset()
    got = {}
    threads = [threading.Thread(target=lambda k, a: got.__setitem__(k, s.push(a)), args=(k, a))
               for k, a in ((0, np.zeros(half, np.float32)), (1, np.zeros(half, np.float32)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got[0]) + len(got[1]) == 2 * half // demo.chunk_samples
    s.reset()
    np.testing.assert_array_equal(s.push(x), want)


def test_use_after_close_says_so(demo):
    s, d = mega_kws.Session(demo), mega_kws.Detector(demo)
    s.close()
    d.close()
    x = np.zeros(100, np.float32)
    for call in (lambda: s.push(x), lambda: s.classify(x), s.reset, lambda: s.stats, s.self_test,
                 lambda: d.update(np.zeros(12, np.float32)), d.reset):
        with pytest.raises(mega_kws.InvalidArgumentError, match="the (session|detector) is closed") as e:
            call()
        assert isinstance(e.value, ValueError) and isinstance(e.value, MegaError)
        assert e.value.status == Status.INVALID_ARGUMENT
    live_s, live_d = mega_kws.Session(demo), mega_kws.Detector(demo)
    with pytest.raises(ValueError, match="the session is closed"):
        live_d.detect(s, x)
    with pytest.raises(ValueError, match="the detector is closed"):
        d.detect(live_s, x)
    with pytest.raises(ValueError, match="the detector is closed"):
        d.flush(live_s)
    s.close()  # twice: nothing
    m = mega_kws.Model(DEMO)
    m.close()
    for make in (mega_kws.Session, mega_kws.Detector):
        with pytest.raises(mega_kws.InvalidArgumentError, match="the model is closed"):
            make(m)
    with pytest.raises(TypeError, match=r"mega_kws.Model\(path\)"):
        mega_kws.Session(DEMO)


# ---- detector settings out of range: refused, not silently the model's (issue 72) ----

@pytest.mark.parametrize("kw", [dict(threshold=-0.5), dict(sensitivity=-1), dict(smoothing=-3), dict(smoothing=2.5),
                                dict(smoothing=2 ** 32 + 3), dict(refractory_ms=-1), dict(refractory_ms=2 ** 32),
                                dict(sensitivity=float("nan"))])
def test_detector_options_out_of_range_are_a_value_error(demo, kw):
    """The C API reads a negative value as "the model's"; from Python that is
    None, so a negative (or wrapped-around) value is a mistake to refuse."""
    (name, value), = kw.items()
    with pytest.raises(ValueError, match=name) as e:
        mega_kws.Detector(demo, **kw)
    assert isinstance(e.value, MegaError) and e.value.status == Status.INVALID_ARGUMENT
    assert "None keeps the model's" in str(e.value)


@pytest.mark.parametrize("flag,value", [("--threshold", "-0.5"), ("--threshold", "0"), ("--threshold", "1.5"),
                                        ("--threshold", "nan"), ("--sensitivity", "-1"), ("--sensitivity", "2"),
                                        ("--smoothing", "-3"), ("--smoothing", "2.5"), ("--smoothing", "2000"),
                                        ("--refractory-ms", "-1"), ("--threads", "0"), ("--threads", "x"),
                                        ("--threshold", "go=1.5"), ("--threshold", "go="), ("--threshold", "=0.5"),
                                        ("--threshold", "go=0.8,go=0.9"), ("--threshold", "gone=0.5")])
def test_scan_refuses_what_keyword_spotter_refuses(flag, value):
    cli = run(CLI, "scan", "-m", DEMO, flag, value, COMMANDS, check=False)
    py = py_cli("scan", "-m", DEMO, flag, value, COMMANDS, check=False)
    assert cli.returncode == 2 and py.returncode == 2, (cli.stderr, py.stderr)
    assert py.stderr == cli.stderr.replace("keyword_spotter:", "mega_kws:") and py.stdout == ""


# ---- scan_file streams the file (issue 72) ----

def test_scan_file_streams_in_bounded_memory(tmp_path, demo):
    """A long recording is read in blocks: the peak of Python's allocations
    stays far under the file's size, and the detections are those of the
    whole file pushed at once."""
    import tracemalloc
    words, _, _ = mega_kws.read_wav(COMMANDS)
    reps = 24  # about five minutes, 9.5 MB of 16-bit PCM
    long = np.concatenate([words] * reps + [words[:12345]])
    path = str(tmp_path / "long.wav")
    write_wav(path, long)
    size = os.path.getsize(path)
    tracemalloc.start()
    try:
        found, seconds = mega_kws.scan_file(path, demo, sensitivity=0.8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size > 9_000_000 and peak < 3_000_000, (size, peak)
    x, rate, n = mega_kws.read_wav(path)
    s, d = mega_kws.Session(demo), mega_kws.Detector(demo, sensitivity=0.8)
    assert found == d.detect(s, x) + d.flush(s)
    assert seconds == n / rate and len(found) >= reps
    # a NaN far into the file is still refused, at its place
    x[400000] = np.nan
    bad = str(tmp_path / "nan.wav")
    write_float_wav(bad, x)
    with pytest.raises(ValueError, match=r"sample 400000 \(at 25\.000 s\) is not a finite number"):
        mega_kws.scan_file(bad, demo)


def test_open_wav_reads_in_blocks_what_read_wav_reads(tmp_path):
    x = speechlike(10000)
    p = str(tmp_path / "stereo24.wav")
    write_wav(p, np.stack([x, -0.25 * x], axis=1), channels=2, width=3)
    whole, rate, n = mega_kws.read_wav(p)
    with mega_kws.open_wav(p) as w:
        assert (w.sample_rate, w.n_frames, w.channels) == (rate, n, 2)
        parts = [w.read(999) for _ in range(12)]
    assert [len(b) for b in parts] == [999] * 10 + [10, 0]
    np.testing.assert_array_equal(np.concatenate(parts), whole)


# ---- audio at another rate: refused clearly (issue 72) ----

def test_audio_at_another_rate_is_refused(tmp_path, demo):
    x, rate, _ = mega_kws.read_wav(os.path.join(SAMPLES, "yes.wav"))
    s, d = mega_kws.Session(demo), mega_kws.Detector(demo)
    for call in (s.push, s.classify, lambda a, sample_rate: d.detect(s, a, sample_rate=sample_rate)):
        with pytest.raises(mega_kws.InvalidArgumentError, match="audio at 44100 Hz, the model takes 16000 Hz"):
            call(x, sample_rate=44100)
    np.testing.assert_array_equal(s.classify(x, sample_rate=rate), s.classify(x))
    p = str(tmp_path / "44k.wav")
    write_wav(p, speechlike(44100), rate=44100)
    for f in (mega_kws.classify_file, mega_kws.scan_file):
        with pytest.raises(ValueError, match="44100 Hz, the model takes 16000 Hz") as e:
            f(p, demo)
        assert str(e.value).count(p) == 1 and "sox" in str(e.value)
    # the command line names the file once, as keyword_spotter does
    for cmd in ("scan", "classify"):
        r = py_cli(cmd, "-m", DEMO, p, check=False)
        assert r.returncode == 1 and r.stderr.count(p) == 1 and "44100 Hz" in r.stderr, r.stderr
    r = py_cli("classify", "-m", DEMO, "--json", p, os.path.join(tmp_path, "missing.wav"), check=False)
    assert r.returncode == 1
    for line in r.stdout.splitlines():
        assert line.count(str(tmp_path)) == 1 and "error" in json.loads(line), line
    r = py_cli("scan", "-m", str(tmp_path / "missing.mega"), p, check=False)
    assert r.returncode == 3 and r.stderr.count("missing.mega") == 1, r.stderr


# ---- one version ----

def _pyproject_version(root=os.path.join(ROOT, "python")):
    import re
    return re.search(r'^version = "([^"]+)"', open(os.path.join(root, "pyproject.toml")).read(), re.M).group(1)


def test_pyproject_has_the_cmake_projects_version():
    import re
    found = re.search(r"project\(mega_kws\s+VERSION\s+([0-9.]+)", open(os.path.join(ROOT, "CMakeLists.txt")).read())
    if not found:
        pytest.skip("the top-level CMakeLists.txt's project() has no VERSION")
    assert _pyproject_version() == found.group(1)
    assert mega_kws.__version__ == found.group(1)
    lib = mega_kws._native.lib()
    if hasattr(lib, "mega_version"):  # the library's own, where it has one
        assert mega_kws._native.library_version() == found.group(1)


def test_the_version_is_read_from_one_place(tmp_path):
    """__version__ is pyproject.toml's (not a second copy in __init__.py);
    without it and without pip's metadata (cmake --install), the library's."""
    src = tmp_path / "python"
    shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "_config.py"))
    text = (src / "pyproject.toml").read_text()
    (src / "pyproject.toml").write_text(text.replace(f'version = "{_pyproject_version()}"', 'version = "9.8.7"'))
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONDONTWRITEBYTECODE="1")
    code = "import mega_kws; print(mega_kws.__version__)"
    assert run(sys.executable, "-c", code, env=env).stdout.strip() == "9.8.7"
    bare = tmp_path / "site"
    shutil.copytree(src / "mega_kws", bare / "mega_kws")
    env["PYTHONPATH"] = str(bare)
    want = mega_kws._native.library_version() or "unknown"
    assert run(sys.executable, "-c", code, env=env, cwd=str(tmp_path)).stdout.strip() == want


# ---- argument types, thresholds by label (issue 85 item 9) ----

@pytest.mark.parametrize("rate", ["16000", 16000.0, True])
def test_sample_rate_must_be_an_integer(demo, rate):
    """"16000" used to be refused as 'audio at 16000 Hz, the model takes
    16000 Hz', and 16000.0 taken."""
    x, _, _ = mega_kws.read_wav(os.path.join(SAMPLES, "yes.wav"))
    s, d = mega_kws.Session(demo), mega_kws.Detector(demo)
    for call in (s.push, s.classify, lambda a, sample_rate: d.detect(s, a, sample_rate=sample_rate)):
        with pytest.raises(TypeError, match=r"sample_rate must be an integer \(Hz\)"):
            call(x, sample_rate=rate)
    np.testing.assert_array_equal(s.classify(x, sample_rate=np.int32(16000)), s.classify(x))


@pytest.mark.parametrize("kw", [dict(threads=2.5), dict(threads="2"), dict(threads=True), dict(threads=None),
                                dict(device=0.5)])
def test_threads_and_device_must_be_integers(demo, kw):
    (name, _), = kw.items()
    with pytest.raises(TypeError, match=f"{name} must be an integer"):
        mega_kws.Session(demo, **kw)


def test_threads_out_of_range_are_refused_not_wrapped(demo):
    for threads in (0, -1, 2 ** 32 + 1):  # 2**32 + 1 used to wrap around to 1 thread
        with pytest.raises(ValueError, match="threads") as e:
            mega_kws.Session(demo, threads=threads)
        assert isinstance(e.value, MegaError) and e.value.status == Status.INVALID_ARGUMENT
    assert mega_kws.Session(demo, threads=np.int64(2)).backend == "cpu"


def test_thresholds_by_label(demo):
    stored = mega_kws.Detector(demo).thresholds
    want = stored.copy()
    want[demo.labels.index("go")], want[demo.labels.index("yes")] = 0.8, 0.3
    for kw in (dict(threshold={"go": 0.8, "yes": 0.3}), dict(thresholds={"go": 0.8, "yes": 0.3})):
        np.testing.assert_allclose(mega_kws.Detector(demo, **kw).thresholds, want, rtol=1e-6)
    # the sensitivity applies after them, as keyword_spotter --threshold go=0.8 --sensitivity S does
    shifted = mega_kws.Detector(demo, threshold={"go": 0.8}, sensitivity=0.7).thresholds
    assert shifted[demo.labels.index("go")] == pytest.approx(0.6)
    # one number and the full list in label order still work
    np.testing.assert_allclose(mega_kws.Detector(demo, threshold=0.7).thresholds, 0.7, rtol=1e-6)
    per = np.linspace(0.1, 0.9, 12)
    np.testing.assert_allclose(mega_kws.Detector(demo, thresholds=list(per)).thresholds, per, rtol=1e-6)
    with pytest.raises(ValueError, match=r"no label 'gone' \(its labels: yes,no,up,"):
        mega_kws.Detector(demo, threshold={"gone": 0.5})
    with pytest.raises(ValueError, match=r"threshold of 'go' must be a number in \(0, 1\]"):
        mega_kws.Detector(demo, threshold={"go": 1.5})
    with pytest.raises(ValueError, match="not both"):
        mega_kws.Detector(demo, threshold={"go": 0.5}, thresholds=[0.5] * 12)
    with pytest.raises(TypeError, match=r"threshold must be a number or a \{label: threshold\} dict"):
        mega_kws.Detector(demo, threshold=[0.5] * 12)


# ---- python3 -m mega_kws as keyword_spotter: several files, -, --version, exit codes (issue 85 item 9) ----

def both(*args, stdin=None, env=None):
    """keyword_spotter and python3 -m mega_kws with the same arguments (and
    standard input): their CompletedProcess, bytes out."""
    py_env = dict(env or os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
    return [subprocess.run(cmd + list(args), input=stdin, capture_output=True, env=e)
            for cmd, e in (([CLI], env), ([sys.executable, "-m", "mega_kws"], py_env))]


def test_version_is_keyword_spotters():
    cli, py = both("--version")
    assert cli.returncode == py.returncode == 0
    assert py.stdout.decode() == f"mega_kws {mega_kws.__version__}\n"
    assert py.stdout.split()[1] == cli.stdout.split()[1]


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_scan_several_files_and_standard_input(flags):
    yes = os.path.join(SAMPLES, "yes.wav")
    with open(COMMANDS, "rb") as f:
        wav = f.read()
    for args, stdin in (([COMMANDS, yes], None), (["-", yes], wav), ([yes, "-"], wav)):
        cli, py = both("scan", "-m", DEMO, "--sensitivity", "0.8", *flags, *args, stdin=stdin)
        assert (py.returncode, py.stdout, py.stderr) == (cli.returncode, cli.stdout, cli.stderr), args
        assert cli.returncode == 0 and len(cli.stdout.splitlines()) >= 6
    cli, py = both("classify", "-m", DEMO, *flags, "-", yes, stdin=wav)
    assert (py.returncode, py.stdout) == (cli.returncode, cli.stdout) and b"commands" not in py.stdout


def test_exit_codes_are_keyword_spotters(tmp_path):
    junk = tmp_path / "junk.mega"
    junk.write_bytes(b"garbage")
    yes = os.path.join(SAMPLES, "yes.wav")
    cases = [(2, ["scan", "-m", DEMO, "-", "-"]),                            # stdin twice
             (3, ["scan", "-m", str(junk), yes]),                            # model not loadable
             (3, ["classify", "-m", os.path.join(FIX, "bad_threshold_zero.mega"), yes]),
             (2, ["scan", "-m", os.path.join(FIX, "tiny_bi.mega"), yes]),    # a model that cannot stream
             (1, ["scan", "-m", DEMO, str(tmp_path / "missing.wav"), yes]),  # a file failed, the other scanned
             (1, ["classify", "-m", DEMO, str(tmp_path / "missing.wav")]),
             (2, ["classify", "-m", DEMO, "--backend", "tpu", yes]),
             (2, ["scan", "-m", DEMO]),                                      # no file
             (2, ["frobnicate"])]
    for want, args in cases:
        cli, py = both(*args, stdin=b"")
        assert cli.returncode == want, (args, cli.stderr)
        assert py.returncode == want, (args, py.stderr)
        assert b"Traceback" not in py.stderr, args
    # cuda: 4 without a GPU (or a library without it), 0 with one, the same in both
    cli, py = both("classify", "-m", DEMO, "--backend", "cuda", yes)
    assert cli.returncode == py.returncode and cli.returncode in (0, 4), (cli.stderr, py.stderr)


def test_no_model_is_a_usage_error(tmp_path):
    """keyword_spotter exits 2 with no -m and no default model; so does this."""
    env = {k: v for k, v in os.environ.items() if k != "MEGA_KWS_MODEL"}
    env.update(PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
    r = run(sys.executable, "-m", "mega_kws", "scan", os.path.join(SAMPLES, "yes.wav"), env=env, check=False,
            cwd=str(tmp_path))
    assert r.returncode == 2 and "no model: give -m PATH" in r.stderr, r.stderr


def test_wav_from_a_file_object_or_a_pipe(demo):
    """What `python3 -m mega_kws scan -` uses: a binary file object, one that
    cannot seek read whole first; the caller's object is left open."""
    path = os.path.join(SAMPLES, "yes.wav")
    want = mega_kws.read_wav(path)
    data = open(path, "rb").read()
    assert len(data) < 60000  # fits in a pipe's buffer: written before it is read
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        got = mega_kws.read_wav(pipe)
        assert not pipe.closed
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1:] == want[1:]
    with open(path, "rb") as f:
        assert mega_kws.classify_file(f, demo).label == "yes"

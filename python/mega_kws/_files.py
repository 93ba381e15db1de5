# SPDX-License-Identifier: Apache-2.0
"""classify_file and scan_file: a WAV file classified or scanned as
keyword_spotter classify and scan do."""

import dataclasses
import math

import numpy as np

from ._detector import Detector
from ._model import _model
from ._session import Session
from ._wav import open_wav


def _open_for(model, path):
    """An open WavReader on path; a file at another rate than the model's is
    refused (keyword_spotter would resample it)."""
    w = open_wav(path)
    if w.sample_rate != model.sample_rate:
        w.close()
        raise ValueError(f"{w.path}: {w.sample_rate} Hz, the model takes {model.sample_rate} Hz: resample it "
                         f"first (sox IN.wav -r {model.sample_rate} OUT.wav), or use keyword_spotter, which "
                         "resamples")
    return w


def _refuse_nonfinite(path, x, first, rate):
    """As keyword_spotter does, a file with NaN/Inf samples is refused
    (first: the index of x[0] in the file)."""
    bad = np.flatnonzero(~np.isfinite(x))
    if len(bad):
        i = first + int(bad[0])
        raise ValueError(f"{path}: sample {i} (at {i / rate:.3f} s) is not a finite number (NaN or Inf)")


@dataclasses.dataclass
class Classification:
    """classify_file's answer (keyword_spotter classify --json's fields)."""
    file: str
    label: str
    score: float          # the label's posterior
    logits: np.ndarray    # (n_classes,) float32, over the chosen window
    duration_s: float
    window_start_s: float
    padded: bool          # the file is shorter than a window (zero-padded)
    sample_rate: int


def _softmax(logits):
    # as keyword_spotter does: float differences, double exponentials and sum, float results
    mx = np.float32(np.max(logits))
    e = [math.exp(float(np.float32(v) - mx)) for v in logits]
    total = 0.0
    for v in e:  # in order, as the CLI adds them (sum() may compensate)
        total += v
    return [float(np.float32(v / total)) for v in e]


def _window_score(labels, logits):
    p = _softmax(logits)
    best = max((q for q, name in zip(p, labels) if not name.startswith("_")), default=-1.0)
    return best if best >= 0.0 else max(p)


def classify_file(path, model=None, backend="cpu", threads=1):
    """Classifies one WAV file (path: or a binary file object, see open_wav) as
    keyword_spotter classify does: a clip up to a window long is zero-padded
    and classified offline; a longer one is streamed and its best window (the
    highest keyword probability) wins; bidirectional models slide whole
    windows instead. model: a Model, a path, or None (the
    default model). A file at another sample rate than the model's is refused
    (ValueError). Returns a Classification."""
    m = _model(model)
    with _open_for(m, path) as w:
        x, rate, n_frames, name = w.read(w.n_frames), w.sample_rate, w.n_frames, w.path
    _refuse_nonfinite(name, x, 0, rate)
    s = Session(m, backend=backend, threads=threads)
    window, chunk = m.window_samples, m.chunk_samples
    start = 0.0
    if len(x) <= window:
        logits = s.classify(x)
    elif not m.streamable:
        hop = max(chunk, window // 4)
        best, off = -1.0, 0
        while True:
            off = min(off, len(x) - window)
            lg = s.classify(x[off:off + window])
            sc = _window_score(m.labels, lg)
            if sc > best:
                best, logits, start = sc, lg, off / m.sample_rate
            if off + window >= len(x):
                break
            off += hop
    else:
        padded_len = max(window, (len(x) + chunk - 1) // chunk * chunk)
        clip = np.zeros(padded_len, np.float32)
        clip[:len(x)] = x
        s.reset()
        rows = s.push(clip)
        n_window = window // chunk
        best = -1.0
        for k in range(n_window - 1, len(rows)):  # full windows only
            sc = _window_score(m.labels, rows[k])
            if sc > best:
                best, logits, start = sc, rows[k].copy(), ((k + 1) * chunk - window) / m.sample_rate
    s.close()
    p = _softmax(logits)
    i = int(np.argmax(p))
    return Classification(file=name, label=m.labels[i], score=p[i], logits=logits,
                          duration_s=n_frames / rate, window_start_s=start,
                          padded=n_frames * m.sample_rate < window * rate, sample_rate=rate)


SCAN_BLOCK_FRAMES = 1 << 16  # what scan_file reads at a time (about 4 s at 16 kHz)


def scan_file(path, model=None, backend="cpu", threads=1, stats=None, **detector_options):
    """Detections in a WAV recording (path: or a binary file object, see
    open_wav), as keyword_spotter scan finds them: the file streamed through a
    session and a Detector (detector_options: its overrides) block by block,
    in memory that does not grow with the file (a file object that cannot seek
    is read whole first), the last partial chunk completed with silence. A file at another sample
    rate than the model's is refused (ValueError). Returns (detections,
    seconds scanned); stats, a dict if given, receives the session's input
    counts (Session.stats: samples clipped to full scale, ...)."""
    m = _model(model)
    with _open_for(m, path) as w, Session(m, backend=backend, threads=threads) as s, \
            Detector(m, **detector_options) as d:
        found = []
        done = 0
        while done < w.n_frames:
            x = w.read(SCAN_BLOCK_FRAMES)
            _refuse_nonfinite(w.path, x, done, w.sample_rate)
            found += d.detect(s, x)
            done += len(x)
        found += d.flush(s)
        if stats is not None:
            stats.update(s.stats)
        return found, w.n_frames / w.sample_rate

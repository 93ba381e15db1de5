# SPDX-License-Identifier: Apache-2.0
"""mega_kws: streaming keyword spotting with the Mega-chunk runtime, from Python.

A thin layer (ctypes) over the C API of libmega_kws (mega/mega_kws.h):

    import mega_kws
    model = mega_kws.Model("sc10-demo.mega")
    session = mega_kws.Session(model)              # backend="cpu", threads=1
    detector = mega_kws.Detector(model)            # the model's tuned detection defaults;
                                                   # or e.g. threshold={"go": 0.8} for some labels
    for d in detector.detect(session, samples, sample_rate=rate):  # float audio in [-1, 1]
        print(f"{d.time_s:.3f} {d.label} {d.score:.3f}")

Samples are 1-D NumPy arrays (or sequences) of floats in [-1, 1]: float32 is
used as is, other float types are converted to float32. Integer arrays are
refused with a TypeError rather than guessed at: scale them yourself, e.g.
``pcm.astype(np.float32) / 32768`` for int16. NaN/Inf samples are replaced by
0 and samples beyond full scale clipped, both counted (Session.stats), as the
runtime does for any caller.

Audio must be at the model's sample rate (model.sample_rate); nothing here
resamples. Pass ``sample_rate=`` (an integer, in Hz) to Session.push,
Session.classify and Detector.detect and audio at another rate is refused
with an error naming both rates; classify_file and scan_file refuse such
files the same way.

Failures of the runtime raise MegaError, which carries the C status
(``.status``, a Status) and the runtime's message (``.message``). Bad
arguments (a detector option out of range, audio at another rate, an object
used after close()) raise InvalidArgumentError: a MegaError with
Status.INVALID_ARGUMENT that is also a ValueError. Arguments of the wrong
type (``sample_rate="16000"``, ``threads=2.5``) raise TypeError naming them.

Threads: a Model is immutable and may be shared by any number of threads,
sessions and detectors. A Session or Detector is one stream: its calls hold
the object's lock, so two threads calling into the same one run one after
the other (give each thread its own for work in parallel). close() (or the
end of a with block) from another thread waits for a call in flight: a push,
detect or update stops at its next chunk and raises InvalidArgumentError
("... was closed ..."), other calls complete; then the object is freed.

``__version__`` is python/pyproject.toml's version, which the tests keep equal
to the CMake project's (and the library's mega_version()).
"""

import contextlib
import dataclasses
import enum
import math
import os
import re
import threading

import numpy as np

from . import _args, _native
from ._native import library_path
from ._wav import WavReader, open_wav, read_wav

__all__ = ["Status", "MegaError", "InvalidArgumentError", "Model", "Session", "Detector", "Detection",
           "Classification", "classify_file", "scan_file", "read_wav", "open_wav", "WavReader",
           "default_model_path", "library_path"]


def _version():
    """The version, written in one place: pyproject.toml beside the package
    (the source tree), else the installed distribution's metadata (pip
    install), else the library's mega_version() (cmake --install installs the
    package and the library from one tree); "unknown" if none says."""
    pyproject = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml")
    try:
        with open(pyproject, encoding="utf-8") as f:
            text = f.read()
        found = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
        if found and re.search(r'^name\s*=\s*"mega-kws"', text, re.M):
            return found.group(1)
    except OSError:
        pass
    try:
        from importlib import metadata
        return metadata.version("mega-kws")
    except Exception:  # not installed with pip (or Python < 3.8)
        pass
    try:
        return _native.library_version() or "unknown"
    except OSError:  # no library found
        return "unknown"


def __getattr__(name):  # __version__ is worked out when first asked for: it may load the library
    if name == "__version__":
        globals()["__version__"] = _version()
        return globals()["__version__"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Status(enum.IntEnum):
    """mega_status: the C API's status codes."""
    OK = 0
    INVALID_ARGUMENT = 1
    IO = 2
    BAD_MODEL = 3
    UNSUPPORTED_MODEL = 4
    NOT_STREAMABLE = 5
    TOO_LONG = 6
    OUT_OF_MEMORY = 7
    SELF_TEST_FAILED = 8
    NO_DEVICE = 9
    DEVICE = 10
    BUSY = 11


class MegaError(Exception):
    """A failure reported by libmega_kws: .status (Status) and .message."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        name = status.name if isinstance(status, Status) else str(status)
        super().__init__(f"{message} [{name}]")


class InvalidArgumentError(MegaError, ValueError):
    """A MegaError with Status.INVALID_ARGUMENT, also a ValueError: an option
    out of range, audio at another sample rate, an object used after close()."""


def _error(status, message):
    return (InvalidArgumentError if status == Status.INVALID_ARGUMENT else MegaError)(status, message)


def _invalid(message):
    return InvalidArgumentError(Status.INVALID_ARGUMENT, message)


def _check(status, what):
    if status != Status.OK:
        text = _native.lib().mega_status_string(status).decode()
        raise _error(status, f"{what}: {text}")


def _load_error(status, what):
    """The runtime's reason for a failed creation, with `what` (e.g. the
    model's path) in front unless the reason names it already."""
    text = _native.lib().mega_load_error().decode(errors="replace")
    if not text:
        return _error(status.value, what)
    return _error(status.value, text if what in text else f"{what}: {text}")


def _check_rate(model, sample_rate):
    if sample_rate is not None and _args.integer("sample_rate", sample_rate, " (Hz)") != model.sample_rate:
        raise _invalid(f"audio at {sample_rate} Hz, the model takes {model.sample_rate} Hz: resample it first "
                       f"(e.g. sox IN.wav -r {model.sample_rate} OUT.wav; keyword_spotter resamples files itself)")


def _samples(x):
    """x as a contiguous 1-D float32 array (see the module's note on dtypes)."""
    a = np.asarray(x)
    if a.dtype.kind in "iu":
        raise TypeError(f"samples are {a.dtype}: the runtime takes float audio in [-1, 1]; convert explicitly, "
                        f"e.g. x.astype(np.float32) / 32768 for int16")
    if a.dtype.kind != "f":
        raise TypeError(f"samples must be floats in [-1, 1], not {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"samples must be 1-D (mono), got shape {a.shape}: mix the channels down first")
    return np.ascontiguousarray(a, dtype=np.float32)


def default_model_path():
    """The model used when none is given: $MEGA_KWS_MODEL, else the demo model
    installed next to the library by cmake --install; None if neither."""
    env = os.environ.get("MEGA_KWS_MODEL")
    if env:
        return env
    try:
        from . import _config
        return _config.MODEL
    except ImportError:
        return None


class _Owned:
    """Owns one C object: self._h, freed by self._free (kept on the object: at
    interpreter exit module globals may be gone) on close(), at the end of a
    with block, or when collected.

    Every native call runs inside `with self._use() as handle:`, which holds
    the object's lock (ctypes releases the GIL during the call, so another
    thread may call close() meanwhile). close() marks the object closing and
    then takes the lock: it waits for the call in flight; calls made of many
    native calls (push, detect, update) check between them and stop."""

    _kind = "object"
    _h = None
    _closing = False

    def __init__(self):
        self._lock = threading.RLock()  # reentrant: a signal handler may close() between two native calls

    @contextlib.contextmanager
    def _use(self):
        with self._lock:
            if self._closing or not self._h:
                raise _invalid(f"the {self._kind} is closed")
            yield self._h

    def _stop_if_closing(self, what):
        if self._closing:
            raise _invalid(f"{what}: the {self._kind} was closed (by another thread) during this call")

    def close(self):
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before it owned anything
            return
        self._closing = True
        with lock:
            if self._h:
                self._free(self._h)
                self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Model(_Owned):
    """A .mega model file, loaded and fully validated (mega_model_load).

    Raises MegaError: Status.IO for a file that cannot be opened,
    Status.BAD_MODEL for one that is not a valid model (the message says what
    is wrong), Status.UNSUPPORTED_MODEL for a newer format. Immutable: share
    it between threads, sessions and detectors."""

    _kind = "model"

    def __init__(self, path):
        super().__init__()
        self.path = os.fspath(path)
        lib = _native.lib()
        st = _native._S(-1)
        self._free = lib.mega_model_free
        self._h = lib.mega_model_load(os.fsencode(self.path), st)
        if not self._h:
            raise _load_error(Status(st.value), self.path)
        self.sample_rate = lib.mega_model_sample_rate(self._h)
        self.n_classes = lib.mega_model_n_classes(self._h)
        self.labels = [lib.mega_model_label(self._h, i).decode() for i in range(self.n_classes)]
        self.chunk_samples = lib.mega_model_chunk_samples(self._h)    # one hop of the detector
        self.window_samples = lib.mega_model_window_samples(self._h)  # what the logits look at
        self.streamable = bool(lib.mega_model_streamable(self._h))

    def close(self):
        """Frees the model. Sessions and detectors made from it keep working;
        one being created from it in another thread is waited for."""
        super().close()

    def __repr__(self):
        return f"Model({self.path!r}: {self.n_classes} labels, {self.sample_rate} Hz, chunk {self.chunk_samples})"


def _model_of(model):
    if not isinstance(model, Model):
        raise TypeError(f"model must be a mega_kws.Model (load one with mega_kws.Model(path)), not "
                        f"{type(model).__name__}")
    return model


class Session(_Owned):
    """One audio stream through a model (mega_session_create_with_options).

    backend: "cpu", "reference" (the scalar reference kernels), "cuda" or "auto"
    (cuda when the library has it and a GPU is present); threads: CPU threads
    sharing each chunk's work (an integer, 1..16); fp16 and device (an
    integer): for cuda. All memory is allocated here. One stream: threads that share it take turns (see the module's note
    on threads)."""

    _kind = "session"

    def __init__(self, model, backend="cpu", threads=1, fp16=False, device=0):
        super().__init__()
        lib = _native.lib()
        self.model = _model_of(model)
        o = _native.SessionOptions()
        lib.mega_session_options_init(o)
        o.backend = backend.encode()
        o.n_threads = _args.int32("threads", threads, _invalid)  # the library checks the range
        o.device = _args.int32("device", device, _invalid)
        o.fp16 = 1 if fp16 else 0
        st = _native._S(-1)
        self._free = lib.mega_session_free
        with model._use() as model_handle:  # Model.close() in another thread waits for this
            h = lib.mega_session_create_with_options(model_handle, o, st)
        if not h:
            raise _load_error(Status(st.value), "cannot create a session")
        self._h = h
        self.backend = lib.mega_session_backend(h).decode()

    def push(self, samples, sample_rate=None):
        """Streams samples; returns the window logits of every chunk they
        completed, shape (n_chunks, n_classes) float32 (n_chunks may be 0).
        sample_rate: the audio's, when known: another rate than the model's is
        refused (InvalidArgumentError) instead of giving meaningless logits."""
        _check_rate(self.model, sample_rate)
        x = _samples(samples)
        lib = _native.lib()
        n, k = len(x), self.model.n_classes
        out = np.empty((n // self.model.chunk_samples + 1, k), np.float32)  # at most this many complete
        used, done = _native.ctypes.c_int64(0), _native.ctypes.c_int32(0)
        off = rows = 0
        base, dst = x.ctypes.data, out.ctypes.data
        with self._use() as h:
            while off < n:  # one chunk per native call
                self._stop_if_closing(f"push, after {off} of {n} samples")
                _check(lib.mega_session_push(h, base + 4 * off, n - off, used, done, dst + 4 * k * rows), "push")
                off += used.value
                rows += done.value
        return out[:rows]

    def classify(self, samples, sample_rate=None):
        """Offline logits of one clip (zero-padded to whole chunks and at least a
        window; resets the stream): shape (n_classes,) float32. sample_rate:
        as for push."""
        _check_rate(self.model, sample_rate)
        x = _samples(samples)
        out = np.empty(self.model.n_classes, np.float32)
        with self._use() as h:
            _check(_native.lib().mega_session_classify(h, x.ctypes.data, len(x), out.ctypes.data), "classify")
        return out

    def reset(self):
        """Back to a fresh stream."""
        with self._use() as h:
            _native.lib().mega_session_reset(h)

    @property
    def stats(self):
        """Input hygiene counts since creation: NaN/Inf samples replaced by 0,
        samples clipped to full scale, chunks whose state was reset."""
        c = [_native.ctypes.c_int64(0) for _ in range(3)]
        with self._use() as h:
            _check(_native.lib().mega_session_stats(h, *c), "stats")
        return {"n_nonfinite_samples": c[0].value, "n_clamped_samples": c[1].value, "n_state_resets": c[2].value}

    def self_test(self):
        """Runs the model file's self-test; returns the max abs logit difference
        (MegaError with Status.SELF_TEST_FAILED if it is over the tolerance)."""
        diff = _native.ctypes.c_float(0)
        with self._use() as h:
            _check(_native.lib().mega_session_self_test(h, diff), "self-test")
        return diff.value


@dataclasses.dataclass(frozen=True)
class Detection:
    """One keyword event (mega_detection)."""
    label: str
    label_index: int
    score: float    # smoothed posterior when it fired
    time_s: float   # when the word was heard: the end of its hop, seconds into the stream
    hop_index: int  # the hop that fired, since the detector was created or reset


def _detection(c):
    return Detection(c.label.decode(), c.label_index, float(c.score), c.time_s, c.hop_index)


def _option(name, value, lo, hi, integer=False, above_lo=False):
    """value checked against [lo, hi] ((lo, hi] with above_lo). The C API
    takes a negative value for "the model's"; here that is None, so a negative
    one is a mistake, refused like any other value out of range."""
    v = float(value)  # TypeError / ValueError for what is not a number
    ok = (v > lo if above_lo else v >= lo) and v <= hi  # False for NaN
    if not ok or (integer and v != int(v)):
        kind = "an integer" if integer else "a number"
        raise _invalid(f"{name} must be {kind} in {'(' if above_lo else '['}{lo}, {hi}], got {value!r} "
                       "(None keeps the model's)")
    return int(v) if integer else v


class Detector(_Owned):
    """Window logits to keyword detections (mega_detector_create), starting from
    the model's stored defaults. Overrides (None keeps the model's):
    threshold: one number for every label, in (0, 1], or a {label: threshold}
    dict for some labels (the others keep the model's; an unknown label is
    refused, naming the model's); or thresholds: one per label in label order
    (or such a dict); smoothing (hops, 1..1024), refractory_ms (0..600000),
    sensitivity (0..1, applied to the thresholds last; 0.5 keeps them). A value out of range
    raises InvalidArgumentError (a ValueError; Status.INVALID_ARGUMENT) with
    the reason. One stream, like a Session."""

    _kind = "detector"

    def __init__(self, model, threshold=None, thresholds=None, smoothing=None, refractory_ms=None,
                 sensitivity=None):
        super().__init__()
        lib = _native.lib()
        self.model = _model_of(model)
        o = _native.DetectorOptions()
        lib.mega_detector_options_init(o)
        keep = None
        threshold, thresholds = _args.split_thresholds(threshold, thresholds, _invalid)
        if isinstance(thresholds, dict):
            with Detector(model) as stored:
                thresholds = _args.by_label(model.labels, stored.thresholds, thresholds, _invalid)
        if thresholds is not None:
            keep = np.ascontiguousarray(np.asarray(thresholds, dtype=np.float64).astype(np.float32).ravel())
            o.thresholds = keep.ctypes.data_as(_native.c_float_p)
            o.n_thresholds = len(keep)
        if threshold is not None:
            o.threshold = _option("threshold", threshold, 0, 1, above_lo=True)
        if smoothing is not None:
            o.smoothing_hops = _option("smoothing", smoothing, *_args.SMOOTHING_HOPS_RANGE, integer=True)
        if refractory_ms is not None:
            o.refractory_ms = _option("refractory_ms", refractory_ms, *_args.REFRACTORY_MS_RANGE, integer=True)
        if sensitivity is not None:
            o.sensitivity = _option("sensitivity", sensitivity, 0, 1)
        st = _native._S(-1)
        self._free = lib.mega_detector_free
        with model._use() as model_handle:  # Model.close() in another thread waits for this
            h = lib.mega_detector_create(model_handle, o, st)
        del keep  # copied by the library
        if not h:
            raise _load_error(Status(st.value), "bad detector options")
        self._h = h
        thr = np.empty(model.n_classes, np.float32)
        smooth, refr = _native.ctypes.c_int32(0), _native.ctypes.c_int32(0)
        _check(lib.mega_detector_settings(h, thr.ctypes.data, smooth, refr), "detector settings")
        self.thresholds, self.smoothing, self.refractory_ms = thr, smooth.value, refr.value
        self._found = (_native.CDetection * 1)()

    def update(self, logits):
        """Feeds window logits: one hop (shape (n_classes,)) or one per row
        (shape (n_hops, n_classes), as Session.push returns them). Returns the
        detections (a list, often empty); their time_s counts hops since the
        detector was created or reset. A NaN or an infinity in any row raises
        InvalidArgumentError (a ValueError) and feeds none of them."""
        a = np.asarray(logits)
        if a.dtype.kind != "f":
            raise TypeError(f"logits must be floats, not {a.dtype}")
        a = np.ascontiguousarray(a, dtype=np.float32)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2 or a.shape[1] != self.model.n_classes:
            raise ValueError(f"logits must have shape ({self.model.n_classes},) or (n, {self.model.n_classes}), "
                             f"got {np.asarray(logits).shape}")
        bad = np.nonzero(~np.isfinite(a).all(axis=1))[0]
        if len(bad):  # refused before any hop is fed, so none is lost (the library refuses them one by one)
            raise _invalid(f"logits of hop {bad[0]} are not all finite (NaN or Inf): nothing was fed")
        lib = _native.lib()
        fired = _native.ctypes.c_int32(0)
        out = []
        with self._use() as h:
            for i in range(a.shape[0]):
                self._stop_if_closing(f"detector update, after {i} of {a.shape[0]} hops")
                _check(lib.mega_detector_update(h, a.ctypes.data + 4 * a.shape[1] * i, self._found, fired),
                       "detector update")
                if fired.value:
                    out.append(_detection(self._found[0]))
        return out

    def detect(self, session, samples, sample_rate=None):
        """Streams samples through session and this detector
        (mega_session_detect); returns the detections, time_s in the session's
        stream (as keyword_spotter scan prints them). sample_rate: as for
        Session.push."""
        _check_rate(self.model, sample_rate)
        x = _samples(samples)
        lib = _native.lib()
        chunk = self.model.chunk_samples
        block = chunk * max(1, self.model.sample_rate // chunk)  # about a second per native call
        found = (_native.CDetection * (block // chunk + 1))()
        n_out = _native.ctypes.c_int32(0)
        out = []
        with session._use() as sh, self._use() as dh:  # always the session first, then the detector
            for off in range(0, len(x), block):
                session._stop_if_closing(f"detect, after {off} of {len(x)} samples")
                self._stop_if_closing(f"detect, after {off} of {len(x)} samples")
                n = min(block, len(x) - off)
                st = lib.mega_session_detect(sh, dh, x.ctypes.data + 4 * off, n, found, len(found), n_out)
                out += [_detection(found[i]) for i in range(n_out.value)]
                _check(st, "detect")
        return out

    def flush(self, session):
        """At the end of a recording: completes the session's partly filled
        chunk with silence so a word at the very end is heard
        (mega_session_detect_flush); returns its detection, if any."""
        n_out = _native.ctypes.c_int32(0)
        with session._use() as sh, self._use() as dh:
            _check(_native.lib().mega_session_detect_flush(sh, dh, self._found, 1, n_out), "flush")
            return [_detection(self._found[i]) for i in range(n_out.value)]

    def reset(self):
        with self._use() as h:
            _native.lib().mega_detector_reset(h)


def _model(model):
    if isinstance(model, Model):
        return model
    path = model if model is not None else default_model_path()
    if path is None:
        raise ValueError("no model: pass one (or set MEGA_KWS_MODEL)")
    return Model(path)


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


# The microphone (libmega_kws_audio), last: it builds on the classes above.
from ._listen import InputDevice, Microphone, devices, listen  # noqa: E402

__all__ += ["listen", "devices", "Microphone", "InputDevice"]

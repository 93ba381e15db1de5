# SPDX-License-Identifier: Apache-2.0
"""Session: one audio stream through a model, and the checks every call that
takes audio makes (its rate, its dtype and shape)."""

import numpy as np

from . import _args, _native
from ._errors import Status, _check, _invalid, _load_error
from ._model import _model_of
from ._owned import _Owned


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

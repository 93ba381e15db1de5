# SPDX-License-Identifier: Apache-2.0
"""Detector: window logits to keyword detections, over a session's stream
or logits fed by hand."""

import dataclasses

import numpy as np

from . import _args, _native
from ._errors import Status, _check, _invalid, _load_error
from ._model import _model_of
from ._owned import _Owned
from ._session import _check_rate, _samples


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

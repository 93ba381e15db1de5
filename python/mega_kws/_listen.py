# SPDX-License-Identifier: Apache-2.0
"""mega_kws.listen: keyword spotting on a microphone, keyword_spotter listen's
path (PortAudio's capture into a lock-free ring, then the session and the
detector) through the C API of libmega_kws_audio (mega/mega_kws_audio.h):

    for d in mega_kws.listen(model):      # the default input; Ctrl-C stops
        print(d.time_s, d.label, d.score)

libmega_kws_audio is looked for, first hit wins: in the MEGA_KWS_AUDIO_LIBRARY
environment variable (a path); beside the libmega_kws the package loaded
(the build tree, cmake --install and the Debian packages put them together);
by the dynamic linker. It comes with keyword_spotter (built where PortAudio
is found; the Debian package mega-kws), not with pip's own build of the
library: without it listen() and devices() raise OSError saying so.
"""

import ctypes
import dataclasses
import os

from . import _native
from ._detector import Detector, _detection
from ._errors import Status, _error, _invalid
from ._model import _model
from ._owned import _Owned
from ._session import Session

AUDIO_LIBRARY_NAME = f"libmega_kws_audio.so.{_native.SOVERSION}"
READ_TIMEOUT_S = 0.1  # how long one native read may block: Ctrl-C and close() act within this


class _MicOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", ctypes.c_char_p)]


class _AudioDevice(ctypes.Structure):
    _fields_ = [("index", ctypes.c_int32), ("is_default", ctypes.c_int32), ("max_input_channels", ctypes.c_int32),
                ("default_sample_rate", ctypes.c_double), ("name", ctypes.c_char * 256),
                ("host_api", ctypes.c_char * 64)]


_P = ctypes.c_void_p
_S = ctypes.c_int
_SIGNATURES = {
    "mega_audio_input_devices": (_S, [ctypes.POINTER(_AudioDevice), ctypes.c_int32, _native.c_int32_p]),
    "mega_audio_silence_library_messages": (None, []),
    "mega_audio_error": (ctypes.c_char_p, []),
    "mega_mic_options_init": (None, [ctypes.POINTER(_MicOptions)]),
    "mega_mic_open": (_P, [_P, _P, ctypes.POINTER(_MicOptions), ctypes.POINTER(_S)]),
    "mega_mic_read": (_S, [_P, ctypes.POINTER(_native.CDetection), ctypes.c_int32, ctypes.c_int32,
                           _native.c_int32_p]),
    "mega_mic_stats": (_S, [_P, ctypes.POINTER(ctypes.c_double), _native.c_int64_p]),
    "mega_mic_device": (_S, [_P, _native.c_int32_p, ctypes.POINTER(ctypes.c_char_p),
                             ctypes.POINTER(ctypes.c_double)]),
    "mega_mic_close": (None, [_P]),
}

_lib = None


def _candidates():
    env = os.environ.get("MEGA_KWS_AUDIO_LIBRARY")
    if env:
        return [env]  # asked for: nothing else is tried
    core = _native.library_path()  # loaded first: libmega_kws_audio links it
    out = []
    for d in (os.path.dirname(core), os.path.dirname(os.path.realpath(core))):
        if d and os.path.join(d, AUDIO_LIBRARY_NAME) not in out:
            out.append(os.path.join(d, AUDIO_LIBRARY_NAME))
    return out + [AUDIO_LIBRARY_NAME]


def audio_lib():
    """libmega_kws_audio, loaded once, every function's signature declared."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.restype, fn.argtypes = restype, argtypes
        _lib = handle
        return _lib
    raise OSError("cannot load libmega_kws_audio, the microphone library (it comes with keyword_spotter, built where "
                  "PortAudio is found; set MEGA_KWS_AUDIO_LIBRARY to its path); tried:\n  " + "\n  ".join(tried))


def _audio_error(status):
    return _error(status, audio_lib().mega_audio_error().decode(errors="replace"))


@dataclasses.dataclass(frozen=True)
class InputDevice:
    """An audio input device (mega_audio_device)."""
    index: int         # what listen(device=index) opens
    name: str          # what listen(device=...) matches, case-insensitively, in part
    host_api: str
    max_input_channels: int
    default_sample_rate: float
    default: bool      # the default input: listen's without device=


def devices(verbose=False):
    """The audio input devices PortAudio sees (keyword_spotter devices); an
    empty list where there is no sound card or sound server. verbose: let ALSA
    and JACK print their own diagnostics (otherwise dropped, process-wide)."""
    lib = audio_lib()
    if not verbose:
        lib.mega_audio_silence_library_messages()
    n = ctypes.c_int32(0)
    while True:  # a device may come between the two calls
        buf = (_AudioDevice * max(1, n.value))()
        st = lib.mega_audio_input_devices(buf, len(buf), n)
        if st != Status.OK:
            raise _audio_error(st)
        if n.value <= len(buf):
            break
    return [InputDevice(d.index, d.name.decode(errors="replace"), d.host_api.decode(errors="replace"),
                        d.max_input_channels, d.default_sample_rate, bool(d.is_default)) for d in buf[:n.value]]


class Microphone(_Owned):
    """An open microphone streaming through a model: iterate it for its
    Detections (listen() makes one). See listen for the arguments."""

    _kind = "microphone"

    def __init__(self, model=None, device=None, backend="cpu", threads=1, verbose=False, **detector_options):
        super().__init__()
        lib = audio_lib()
        if isinstance(device, bool) or (device is not None and not isinstance(device, (str, int))):
            raise TypeError(f"device must be a name (str), an index (int) or None, not {type(device).__name__}")
        if isinstance(device, int) and device < 0:
            raise _invalid(f"device index must be >= 0, got {device}")
        self.model = _model(model)
        self._session = Session(self.model, backend=backend, threads=threads)
        self._detector = Detector(self.model, **detector_options)
        self.thresholds = self._detector.thresholds  # the settings in force
        if not verbose:
            lib.mega_audio_silence_library_messages()
        o = _MicOptions()
        lib.mega_mic_options_init(o)
        o.device = None if device is None else str(device).encode()
        st = _S(-1)
        self._free = lib.mega_mic_close
        with self._session._use() as sh, self._detector._use() as dh:
            h = lib.mega_mic_open(sh, dh, o, st)
        if not h:
            err = _audio_error(st.value)
            self.close()
            raise err
        self._h = h
        index, name, rate = ctypes.c_int32(0), ctypes.c_char_p(), ctypes.c_double(0)
        lib.mega_mic_device(h, index, name, rate)
        self.device_index, self.device_name, self.device_rate = index.value, name.value.decode(errors="replace"), \
            rate.value
        self._found = (_native.CDetection * 8)()
        self._pending = []

    def read(self, timeout=READ_TIMEOUT_S):
        """The detections heard within `timeout` seconds (0..600), often none;
        returns at the first. MegaError (Status.DEVICE) when the device fails
        or goes away."""
        ms = round(float(timeout) * 1000)
        if not 0 <= ms <= 600000:
            raise _invalid(f"timeout must be in [0, 600] seconds, got {timeout!r}")
        lib = audio_lib()
        n = ctypes.c_int32(0)
        with self._use() as h:
            st = lib.mega_mic_read(h, self._found, len(self._found), ms, n)
            if st != Status.OK:
                raise _audio_error(st)
            return [_detection(self._found[i]) for i in range(n.value)]

    def __iter__(self):
        return self

    def __next__(self):
        """The next detection, waiting as long as it takes. Ends (StopIteration)
        once closed; an error or Ctrl-C (KeyboardInterrupt) closes the
        microphone before it propagates."""
        while not self._pending:
            if self._closing or not self._h:
                raise StopIteration
            try:
                self._pending += self.read(READ_TIMEOUT_S)
            except BaseException:
                self.close()
                raise
        return self._pending.pop(0)

    def stats(self):
        """Seconds of audio streamed through the model, and frames dropped
        because the detections were not read within the ring's 4 s."""
        seconds, dropped = ctypes.c_double(0), ctypes.c_int64(0)
        with self._use() as h:
            audio_lib().mega_mic_stats(h, seconds, dropped)
        return {"seconds": seconds.value, "dropped_frames": dropped.value}

    def close(self):
        """Stops the capture and closes the device (then the microphone's
        session and detector); a read in another thread is waited for."""
        super().close()
        for own in (getattr(self, "_detector", None), getattr(self, "_session", None)):
            if own is not None:
                own.close()

    def __repr__(self):
        state = "closed" if self._closing or not self._h else f"device {self.device_index} '{self.device_name}'"
        return f"Microphone({state})"


def listen(model=None, device=None, threshold=None, sensitivity=None, backend="cpu", threads=1, verbose=False,
           **detector_options):
    """Keyword spotting on a microphone: returns an open Microphone, an
    iterator of Detections (the type Detector returns; time_s in seconds since
    the microphone opened), as keyword_spotter listen hears them:

        for d in mega_kws.listen(model, sensitivity=0.7):
            print(f"{d.time_s:.3f} {d.label} {d.score:.3f}")

    model: a Model, a path, or None (the default model). device: None (the
    default input), an index, or a case-insensitive part of a name (devices()
    lists them). threshold, sensitivity and detector_options (thresholds=,
    smoothing=, refractory_ms=): Detector's overrides of the model's stored
    defaults. backend, threads: Session's. verbose: let ALSA and JACK print
    their own diagnostics (otherwise dropped, process-wide).

    The device runs at the model's rate if it can, else it is resampled. While
    the loop body runs the device keeps recording into a 4 s ring; audio
    older than that is dropped (Microphone.stats() counts it). The microphone
    closes when the iterator is closed (close(), the end of a with block),
    collected, or stopped by an error or Ctrl-C. Raises MegaError with
    Status.NO_DEVICE and the reason when there is no input device (no sound
    card or sound server) or none matches `device` (the message lists them),
    Status.DEVICE when it cannot be opened; OSError without libmega_kws_audio."""
    return Microphone(model, device, backend=backend, threads=threads, verbose=verbose, threshold=threshold,
                      sensitivity=sensitivity, **detector_options)


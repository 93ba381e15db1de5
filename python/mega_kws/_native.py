# SPDX-License-Identifier: Apache-2.0
"""ctypes declarations of the C API (runtime/include/mega/mega_kws.h) and the
search for libmega_kws.

Where the library is looked for, first hit wins:
  1. the MEGA_KWS_LIBRARY environment variable (a path);
  2. the path written into mega_kws/_config.py by `cmake --install` (and the
     Debian package python3-mega-kws), or by `pip install ./python` (the
     installed library it found, or the one it built into the package);
  3. an installed libmega_kws.so.SOVERSION in the system's library
     directories (/usr/lib/<multiarch triplet> as the Debian package
     libmega-kwsN puts it, /usr/local/lib, ...): installed_library();
  4. the system's search (ctypes.util.find_library, then dlopen of
     libmega_kws.so.SOVERSION and libmega_kws.so: LD_LIBRARY_PATH, ldconfig).
"""

import ctypes
import ctypes.util
import os
import sysconfig

SOVERSION = 0  # libmega_kws.so.0: the project's major version (CMakeLists.txt)
LIBRARY_NAME = f"libmega_kws.so.{SOVERSION}"

c_float_p = ctypes.POINTER(ctypes.c_float)
c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_int64_p = ctypes.POINTER(ctypes.c_int64)


class SessionOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char_p), ("n_threads", ctypes.c_int32), ("fp16", ctypes.c_int32),
                ("device", ctypes.c_int32)]


class DetectorOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("thresholds", c_float_p), ("n_thresholds", ctypes.c_int32),
                ("threshold", ctypes.c_float), ("smoothing_hops", ctypes.c_int32),
                ("refractory_ms", ctypes.c_int32), ("sensitivity", ctypes.c_float)]


class CDetection(ctypes.Structure):
    _fields_ = [("label_index", ctypes.c_int32), ("label", ctypes.c_char_p), ("score", ctypes.c_float),
                ("time_s", ctypes.c_double), ("hop_index", ctypes.c_int64)]


_P = ctypes.c_void_p  # opaque handles and float buffers (numpy addresses)
_S = ctypes.c_int     # mega_status (a C enum)

# name: (restype, argtypes)
_SIGNATURES = {
    "mega_model_load": (_P, [ctypes.c_char_p, ctypes.POINTER(_S)]),
    "mega_load_error": (ctypes.c_char_p, []),
    "mega_model_free": (None, [_P]),
    "mega_model_sample_rate": (ctypes.c_int32, [_P]),
    "mega_model_n_classes": (ctypes.c_int32, [_P]),
    "mega_model_label": (ctypes.c_char_p, [_P, ctypes.c_int32]),
    "mega_model_chunk_samples": (ctypes.c_int64, [_P]),
    "mega_model_window_samples": (ctypes.c_int64, [_P]),
    "mega_model_streamable": (ctypes.c_int32, [_P]),
    "mega_session_options_init": (None, [ctypes.POINTER(SessionOptions)]),
    "mega_session_create_with_options": (_P, [_P, ctypes.POINTER(SessionOptions), ctypes.POINTER(_S)]),
    "mega_session_backend": (ctypes.c_char_p, [_P]),
    "mega_session_free": (None, [_P]),
    "mega_session_reset": (None, [_P]),
    "mega_session_push": (_S, [_P, _P, ctypes.c_int64, c_int64_p, c_int32_p, _P]),
    "mega_session_classify": (_S, [_P, _P, ctypes.c_int64, _P]),
    "mega_session_stats": (_S, [_P, c_int64_p, c_int64_p, c_int64_p]),
    "mega_session_self_test": (_S, [_P, c_float_p]),
    "mega_status_string": (ctypes.c_char_p, [_S]),
    "mega_detector_options_init": (None, [ctypes.POINTER(DetectorOptions)]),
    "mega_detector_create": (_P, [_P, ctypes.POINTER(DetectorOptions), ctypes.POINTER(_S)]),
    "mega_detector_free": (None, [_P]),
    "mega_detector_reset": (None, [_P]),
    "mega_detector_settings": (_S, [_P, _P, c_int32_p, c_int32_p]),
    "mega_detector_update": (_S, [_P, _P, ctypes.POINTER(CDetection), c_int32_p]),
    "mega_session_detect": (_S, [_P, _P, _P, ctypes.c_int64, ctypes.POINTER(CDetection), ctypes.c_int32,
                                 c_int32_p]),
    "mega_session_detect_flush": (_S, [_P, _P, ctypes.POINTER(CDetection), ctypes.c_int32, c_int32_p]),
}

_lib = None
_lib_path = None
_lib_origin = None


def library_dirs():
    """The directories installed_library() searches, in order: the
    multiarch ones first (Debian's /usr/lib/x86_64-linux-gnu)."""
    arch = sysconfig.get_config_var("MULTIARCH")
    out = []
    for prefix in ("/usr/local", "/usr"):
        if arch:
            out.append(f"{prefix}/lib/{arch}")
        out += [f"{prefix}/lib64", f"{prefix}/lib"]
    return out


def installed_library():
    """The path of an installed libmega_kws.so.SOVERSION in library_dirs(),
    or None."""
    for d in library_dirs():
        path = os.path.join(d, LIBRARY_NAME)
        if os.path.exists(path):
            return path
    return None


def _candidates():
    env = os.environ.get("MEGA_KWS_LIBRARY")
    if env:
        return [("MEGA_KWS_LIBRARY", env)]  # asked for: nothing else is tried
    out = []
    try:
        from . import _config  # written by cmake --install or pip install
        if _config.LIBRARY:
            out.append(("the installed package's _config.py", _config.LIBRARY))
    except ImportError:
        pass
    installed = installed_library()
    if installed:
        out.append(("the system's library directories", installed))
    found = ctypes.util.find_library("mega_kws")
    if found:
        out.append(("ctypes.util.find_library", found))
    out += [("the dynamic linker", LIBRARY_NAME), ("the dynamic linker", "libmega_kws.so")]
    return out


def lib():
    """The loaded library, with every function's signature declared (loaded once)."""
    global _lib, _lib_path, _lib_origin
    if _lib is not None:
        return _lib
    tried = []
    for where, path in _candidates():
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({where}): {e}")
            continue
        missing = [name for name in _SIGNATURES if not hasattr(handle, name)]
        if missing:
            tried.append(f"{path} ({where}): too old, lacks {', '.join(missing[:3])}")
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.restype = restype
            fn.argtypes = argtypes
        # the options structs are the C library's size: a mismatch means another ABI
        opts = DetectorOptions()
        handle.mega_detector_options_init(ctypes.byref(opts))
        if opts.struct_size != ctypes.sizeof(DetectorOptions):
            tried.append(f"{path} ({where}): mega_detector_options is {opts.struct_size} bytes there, "
                         f"{ctypes.sizeof(DetectorOptions)} here")
            continue
        _lib, _lib_path, _lib_origin = handle, path, where
        return _lib
    raise OSError("cannot load libmega_kws (set MEGA_KWS_LIBRARY to its path); tried:\n  " + "\n  ".join(tried))


def library_path():
    """The path (or name) libmega_kws was loaded from."""
    lib()
    return _lib_path


def library_version():
    """The loaded library's mega_version() ("MAJOR.MINOR.PATCH"), or None for
    a library without it (older than the function)."""
    fn = getattr(lib(), "mega_version", None)
    if fn is None:
        return None
    fn.restype, fn.argtypes = ctypes.c_char_p, []
    return fn().decode()


def library_origin():
    """How library_path() was found (e.g. "MEGA_KWS_LIBRARY", "the installed
    package's _config.py")."""
    lib()
    return _lib_origin

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

import os
import re

from . import _native
from ._detector import Detection, Detector
from ._errors import InvalidArgumentError, MegaError, Status
from ._files import SCAN_BLOCK_FRAMES, Classification, classify_file, scan_file  # noqa: F401 (SCAN_BLOCK_FRAMES: as before)
from ._listen import InputDevice, Microphone, devices, listen
from ._model import Model, default_model_path
from ._native import library_path
from ._session import Session
from ._wav import WavReader, open_wav, read_wav

__all__ = ["Status", "MegaError", "InvalidArgumentError", "Model", "Session", "Detector", "Detection",
           "Classification", "classify_file", "scan_file", "read_wav", "open_wav", "WavReader",
           "default_model_path", "library_path", "listen", "devices", "Microphone", "InputDevice"]


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

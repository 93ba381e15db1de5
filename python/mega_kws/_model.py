# SPDX-License-Identifier: Apache-2.0
"""Model: a loaded .mega file, and where the default one is found."""

import os

from . import _native
from ._errors import Status, _load_error
from ._owned import _Owned


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


def _model(model):
    if isinstance(model, Model):
        return model
    path = model if model is not None else default_model_path()
    if path is None:
        raise ValueError("no model: pass one (or set MEGA_KWS_MODEL)")
    return Model(path)

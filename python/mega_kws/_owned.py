# SPDX-License-Identifier: Apache-2.0
"""_Owned: the one C object a Model, Session, Detector or Microphone owns,
its lock and its close()."""

import contextlib
import threading

from ._errors import _invalid


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

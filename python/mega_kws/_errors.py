# SPDX-License-Identifier: Apache-2.0
"""The C API's status codes and the exceptions that carry them (see the
package's note on errors)."""

import enum

from . import _native


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

# SPDX-License-Identifier: Apache-2.0
"""Digests of files, read in blocks: the converter records its checkpoint's
sha256 in the model file, and the teacher's fetch checks pinned sha256 and npm
integrity (sha512) values. Installed with the converter (cmake/install.cmake)."""

import hashlib


def file_digest(path: str, algorithm: str = "sha256") -> bytes:
    """The raw digest of a file's bytes by a hashlib algorithm, read 1 MiB at a time."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def sha256_of(path: str) -> str:
    """A file's sha256 in hex."""
    return file_digest(path, "sha256").hex()

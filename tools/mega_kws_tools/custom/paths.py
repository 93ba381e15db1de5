# SPDX-License-Identifier: Apache-2.0
"""What the custom-keyword modules share: the repository's root, the stage
names in order, a file's hash."""

import hashlib
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_BACKBONE = os.path.join(ROOT, "models", "sc10-demo.mega")
STAGES = ["words", "render", "speech", "embed", "train", "tune", "write", "measure"]


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

# SPDX-License-Identifier: Apache-2.0
"""What the custom-keyword modules share: the repository's root, the stage
names in order, a file's hash."""

import os

from mega_kws_tools.hashing import sha256_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_BACKBONE = os.path.join(ROOT, "models", "sc10-demo.mega")
STAGES = ["words", "render", "speech", "embed", "train", "tune", "write", "measure"]


def file_sha256(path: str) -> str:
    return sha256_of(path)

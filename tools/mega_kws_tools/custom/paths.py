# SPDX-License-Identifier: Apache-2.0
"""What the custom-keyword modules share: the repository's root and the stage
names in order."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_BACKBONE = os.path.join(ROOT, "models", "sc10-demo.mega")
STAGES = ["words", "render", "speech", "embed", "train", "tune", "write", "measure"]

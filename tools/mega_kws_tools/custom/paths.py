# SPDX-License-Identifier: Apache-2.0
"""What the custom-keyword modules share: the repository's root, the stage
names in order, and the defaults of each front end (--front-end)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_BACKBONE = {"mega": os.path.join(ROOT, "models", "sc10-demo.mega"),
                    "teacher": os.path.join(ROOT, "models", "sc10-teacher.mega")}
DEFAULT_STEPS = {"mega": 3000, "teacher": 1500}
STAGES = ["words", "render", "speech", "embed", "train", "tune", "write", "measure"]

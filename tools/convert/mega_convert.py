#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/convert/mega_convert.py: a PyTorch checkpoint to a .mega model file. The converter's code is the
package mega_kws_tools.convert beside this folder; this entry point runs it from
where the project's layout names the converter, with no PYTHONPATH or install.
Same arguments as python3 -m mega_kws_tools.convert.mega_convert (--help)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/
from mega_kws_tools.convert.mega_convert import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main())

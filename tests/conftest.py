# SPDX-License-Identifier: Apache-2.0
"""What every test under tests/ shares: the tools the tests run as programs
(`python3 -m mega_kws_tools...`) find their package as the tests do (pytest.ini's
pythonpath puts tools/ on this process's path; a child process needs it in
PYTHONPATH)."""

import os

_TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_TOOLS, os.environ.get("PYTHONPATH")) if p)

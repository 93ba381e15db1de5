#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every source file of the repository names its license in an SPDX line
(`SPDX-License-Identifier: Apache-2.0`) within its first three lines: C, C++
and CUDA sources and headers, Python, shell, CMake and FlatBuffers schema
files that git tracks. Generated code (the FlatBuffers Python schema, which
gen_schema writes) and test fixtures are left out.

Usage: check_spdx.py [--fix] [ROOT]   (default: the repository this script is in)
Prints each file without the line; exit 1 if any, else 0. --fix adds the line
(after a #! line, as a comment in the file's own syntax) and exits 0.
"""

import argparse
import os
import subprocess
import sys

TAG = "SPDX-License-Identifier: Apache-2.0"
SLASHES = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".inc", ".fbs")
HASHES = (".py", ".sh", ".cmake")
SKIP_DIRS = ("tools/mega_kws_tools/convert/schema/", "tests/fixtures/data/", "fuzz/corpus/")


def comment_for(path):
    name = os.path.basename(path)
    if name.endswith(SLASHES):
        return "// " + TAG
    if name.endswith(HASHES) or name == "CMakeLists.txt" or path.startswith(".ci/"):
        return "# " + TAG
    return None


def sources(root):
    files = subprocess.run(["git", "-C", root, "ls-files"], stdout=subprocess.PIPE, text=True,
                           check=True).stdout.split("\n")
    for path in files:
        if path and not path.startswith(SKIP_DIRS) and comment_for(path):
            yield path


def has_tag(lines):
    return any(TAG in line for line in lines[:3])


def add_tag(lines, comment):
    at = 1 if lines and lines[0].startswith("#!") else 0
    return lines[:at] + [comment + "\n"] + lines[at:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fix", action="store_true")
    ap.add_argument("root", nargs="?", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = ap.parse_args()
    missing = []
    for path in sources(a.root):
        full = os.path.join(a.root, path)
        with open(full, encoding="utf-8") as f:
            lines = f.readlines()
        if has_tag(lines):
            continue
        missing.append(path)
        if a.fix:
            with open(full, "w", encoding="utf-8") as f:
                f.writelines(add_tag(lines, comment_for(path)))
    for path in missing:
        print(f"{path}: no '{TAG}' line" + (" (added)" if a.fix else ""))
    return 1 if missing and not a.fix else 0


if __name__ == "__main__":
    sys.exit(main())

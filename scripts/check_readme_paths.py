#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every path README.md names must exist: the targets of its relative
Markdown links, the repository paths in its code (inline `...` and fenced
blocks: apps/..., docs/..., samples/*.wav, ...), the file names in its text
(relative to the README's directory), and the build outputs it
runs as ./build/... (which scripts/demo.sh and scripts/test.sh build; looked
for in BUILD_DIR).

Usage: check_readme_paths.py [--build BUILD_DIR] [README]   (defaults: build, README.md)
Prints each missing path with its line; exit 1 if any, else 0.
"""

import argparse
import glob
import os
import re
import sys

# the repository's top-level directories: a code token starting with one of
# them is a path into the repository
TOP = ("apps", "bench", "cmake", "docs", "examples", "formats", "fuzz", "kernels", "models", "python",
       "runtime", "samples", "scripts", "tests", "toolchains", "tools")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INLINE = re.compile(r"`([^`\n]+)`")
# a file named in the prose (outside links and code), e.g. "recipes in notes.md"
PROSE_FILE = re.compile(r"(?<![\w/.-])([\w-]+(?:/[\w.-]+)*\.(?:md|sh|py|cpp|hpp|h|c|txt|json|cmake))\b")
TOKEN_END = ",;:)'\"."


def _is_local_link(target):
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")


def paths_named(text):
    """(line number, path, kind) for each path the README names; kind is
    'link', 'build' (./build/...), 'code' or 'prose'."""
    out = []
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            for target in LINK.findall(line):
                if _is_local_link(target):
                    out.append((n, target.split("#")[0], "link"))
            prose = INLINE.sub(" ", LINK.sub(" ", line))
            out += [(n, name, "prose") for name in PROSE_FILE.findall(prose)]
        code = [line] if fenced else INLINE.findall(line)
        for span in code:
            for tok in re.split(r"[\s|<>=(]+", span):
                tok = tok.rstrip(TOKEN_END)
                if tok.startswith("./build/"):
                    out.append((n, tok[len("./build/"):], "build"))
                elif tok.split("/")[0] in TOP and "/" in tok and not re.search(r"[A-Z]{3,}|\.\.\.|\{", tok):
                    out.append((n, tok, "code"))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="the build directory ./build/ stands for [build]")
    ap.add_argument("readme", nargs="?", default="README.md")
    a = ap.parse_args(argv)
    root = os.path.dirname(os.path.abspath(a.readme))
    with open(a.readme, encoding="utf-8") as f:
        named = paths_named(f.read())
    missing = []
    for n, path, kind in named:
        base = a.build if kind == "build" else root
        full = os.path.join(base, path)
        if not (glob.glob(full) if "*" in path else os.path.exists(full)):
            where = f"{a.build}/{path} (./build/{path})" if kind == "build" else path
            missing.append(f"{a.readme}:{n}: {where} does not exist")
    for m in missing:
        print(m, file=sys.stderr)
    counts = {k: sum(1 for *_, kind in named if kind == k) for k in ("link", "code", "prose", "build")}
    print(f"{a.readme}: {counts['link']} links, {counts['code']} repository paths in code, {counts['prose']} "
          f"file names in the text, {counts['build']} ./build/ paths: {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every relative Markdown link in the documentation under a folder resolves
to a file or folder inside that folder: run on the installed documentation
(share/doc/mega-kws), it finds the links to files the install left out.
Links are read as check_readme_paths.py reads them (outside code; the part
before any #anchor); links with a scheme (https:) and bare anchors are not
checked.

Usage: check_doc_links.py DIR
Prints each broken link with its file and line; exit 1 if any, else 0.
"""

import argparse
import os
import sys

from check_readme_paths import paths_named


def broken_links(root):
    """(file, line, target, why) for each relative link under root that does not resolve inside it."""
    root = os.path.realpath(root)
    out = []
    n_links = 0
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith(".md")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                links = [(n, target) for n, target, kind in paths_named(f.read()) if kind == "link"]
            n_links += len(links)
            for n, target in links:
                full = os.path.realpath(os.path.join(folder, target))
                if os.path.commonpath([root, full]) != root:
                    out.append((path, n, target, "points outside the documentation"))
                elif not os.path.exists(full):
                    out.append((path, n, target, "does not exist"))
    return out, n_links


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the documentation folder, e.g. PREFIX/share/doc/mega-kws")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.dir):
        ap.error(f"{a.dir}: no such folder")
    broken, n_links = broken_links(a.dir)
    for path, n, target, why in broken:
        print(f"{path}:{n}: {target} {why}", file=sys.stderr)
    print(f"{a.dir}: {n_links} relative links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Python modules and functions no longer than given limits: the lines of each
.py file, and of each function or method (its def line to its last line,
decorators and docstring included), found with ast.

Usage: check_py_sizes.py [--max-module-lines N] [--max-function-lines N]
                         [--exclude DIR] [--allow NAME] [--top K] PATH [PATH ...]
  e.g. check_py_sizes.py --max-module-lines 500 --max-function-lines 80 tools/mega_kws_tools
PATH is a .py file or a folder searched for them (__pycache__ skipped;
--exclude skips a folder, e.g. generated code; repeatable). --allow names a
module (its path) or function (PATH:NAME, NAME as printed, e.g. Class.method)
known to be over, still listed but not failing the check; one that is no
longer over fails it, so the list only shrinks. Prints each module and function
over its limit, then the K largest of each (--top, default 5); exit 1 if any
is over and not allowed, else 0. A limit of 0 checks nothing.
"""

import argparse
import ast
import os
import sys


def py_files(paths, exclude):
    skip = {os.path.normpath(e) for e in exclude}
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for folder, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and os.path.normpath(os.path.join(folder, d)) not in skip)
            yield from (os.path.join(folder, f) for f in sorted(files) if f.endswith(".py"))


def functions(tree, prefix=""):
    """(qualified name, first line, last line) of every function and method,
    nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = prefix + node.name
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if not isinstance(node, ast.ClassDef):
                yield name, first, node.end_lineno
            yield from functions(node, name + ".")
        else:
            yield from functions(node, prefix)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="PATH")
    ap.add_argument("--max-module-lines", type=int, default=500)
    ap.add_argument("--max-function-lines", type=int, default=80)
    ap.add_argument("--exclude", action="append", default=[], metavar="DIR")
    ap.add_argument("--allow", action="append", default=[], metavar="NAME")
    ap.add_argument("--top", type=int, default=5, metavar="K")
    args = ap.parse_args(argv)
    mods, funcs = [], []
    for path in py_files(args.paths, args.exclude):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        mods.append((len(text.splitlines()), path))
        funcs += [(last - first + 1, f"{path}:{first} {name}", f"{path}:{name}")
                  for name, first, last in functions(ast.parse(text, path))]
    over = [(p, f"module {p}: {n} lines (limit {args.max_module_lines})")
            for n, p in mods if args.max_module_lines and n > args.max_module_lines]
    over += [(key, f"function {w}: {n} lines (limit {args.max_function_lines})")
             for n, w, key in funcs if args.max_function_lines and n > args.max_function_lines]
    allowed = {os.path.normpath(a) if ":" not in a else a for a in args.allow}
    failing = 0
    for key, line in over:
        known = key in allowed or os.path.normpath(key) in allowed
        failing += not known
        print(line + (" (allowed)" if known else ""))
    for name in sorted(allowed - {k for k, _ in over} - {os.path.normpath(k) for k, _ in over}):
        failing += 1
        print(f"--allow {name}: not over the limits (any more): take it off the list")
    funcs = [(n, w) for n, w, _ in funcs]
    for kind, items in (("modules", mods), ("functions", funcs)):
        print(f"largest {kind}: " + "; ".join(f"{w} {n}" for n, w in sorted(items, reverse=True)[:args.top]))
    print(f"{len(mods)} modules, {len(funcs)} functions: {len(over)} over the limits, {failing} failing")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())

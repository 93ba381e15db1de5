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


def files_under(paths, exclude, extensions=(".py",)):
    """Each file named in paths, and each file with one of the extensions in
    the folders named there (__pycache__ and the excluded folders skipped)."""
    skip = {os.path.normpath(e) for e in exclude}
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for folder, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and os.path.normpath(os.path.join(folder, d)) not in skip)
            yield from (os.path.join(folder, f) for f in sorted(files) if f.endswith(extensions))


def limits_parser(doc, unit, max_unit_lines):
    """The command line both size checks take (unit: "module" or "file")."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="PATH")
    ap.add_argument(f"--max-{unit}-lines", type=int, default=max_unit_lines)
    ap.add_argument("--max-function-lines", type=int, default=80)
    ap.add_argument("--exclude", action="append", default=[], metavar="DIR")
    ap.add_argument("--allow", action="append", default=[], metavar="NAME")
    ap.add_argument("--top", type=int, default=5, metavar="K")
    return ap


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


def report(kind, units, funcs, max_unit_lines, max_function_lines, allow, top):
    """Prints what is over its limit (kind: "module" or "file"; units: (lines,
    path); funcs: (lines, where, PATH:NAME)) and the largest of each; returns
    the exit status: 1 if anything over is not allowed, or allowed and not
    over (also used by check_cpp_sizes.py)."""
    over = [(p, f"{kind} {p}: {n} lines (limit {max_unit_lines})")
            for n, p in units if max_unit_lines and n > max_unit_lines]
    over += [(key, f"function {w}: {n} lines (limit {max_function_lines})")
             for n, w, key in funcs if max_function_lines and n > max_function_lines]
    allowed = {os.path.normpath(a) if ":" not in a else a for a in allow}
    failing = 0
    for key, line in over:
        known = key in allowed or os.path.normpath(key) in allowed
        failing += not known
        print(line + (" (allowed)" if known else ""))
    for name in sorted(allowed - {k for k, _ in over} - {os.path.normpath(k) for k, _ in over}):
        failing += 1
        print(f"--allow {name}: not over the limits (any more): take it off the list")
    for what, items in ((kind + "s", units), ("functions", [(n, w) for n, w, _ in funcs])):
        print(f"largest {what}: " + "; ".join(f"{w} {n}" for n, w in sorted(items, reverse=True)[:top]))
    print(f"{len(units)} {kind}s, {len(funcs)} functions: {len(over)} over the limits, {failing} failing")
    return 1 if failing else 0


def main(argv=None) -> int:
    args = limits_parser(__doc__, "module", 500).parse_args(argv)
    mods, funcs = [], []
    for path in files_under(args.paths, args.exclude):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        mods.append((len(text.splitlines()), path))
        funcs += [(last - first + 1, f"{path}:{first} {name}", f"{path}:{name}")
                  for name, first, last in functions(ast.parse(text, path))]
    return report("module", mods, funcs, args.max_module_lines, args.max_function_lines, args.allow, args.top)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No import cycle inside a Python package: between its modules, and between
its subpackages (a module of data/ importing training/ and one of training/
importing data/ is a cycle of the layers even when no two modules close it).
Every import counts, also one inside a function (a deferred import still ties
the two together). Reads the source only (ast); imports nothing.

Usage: check_py_imports.py PACKAGE_DIR [PACKAGE_DIR ...]
  e.g. check_py_imports.py tools/mega_kws_tools
Prints each cycle found (modules, then subpackages); exit 1 if any, else 0.
"""

import ast
import os
import sys


def modules(root):
    """{dotted module name: path} for every .py file under the package root."""
    base = os.path.dirname(os.path.abspath(root))
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
                out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def defined(path):
    """The names a module binds at its top level (defs, classes, assignments, imports)."""
    out = set()
    for node in ast.parse(open(path, encoding="utf-8").read(), path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def imported(name, path, known):
    """The package's modules that the module `name` imports. A package's own
    __init__ counts for its submodules only where one takes a name from it
    (`from . import Session`): importing a submodule runs the package's
    __init__ too, but is no tie to what that __init__ defines."""
    is_package = path.endswith("__init__.py")
    package = name if is_package else name.rpartition(".")[0]
    targets = set()
    names_from = set()  # packages some name (not a submodule) is taken from
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for a in node.names:  # `from pkg import module` imports the module
                sub = f"{base}.{a.name}"
                targets.add(sub if sub in known else base)
                if sub not in known and base in known and a.name in defined(known[base]):
                    names_from.add(base)  # (not a submodule missing from the source, e.g. generated)
    out = set()
    for t in targets:
        while t and t not in known:
            t = t.rpartition(".")[0]
        if t and t != name and (not name.startswith(t + ".") or t in names_from):
            out.add(t)
    return out


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer(name, top):
    """The subpackage (or top-level module) of the package `top` that holds name."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else top


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    bad = 0
    for root in argv:
        bad_before = bad
        known = modules(root)
        graph = {n: imported(n, p, known) for n, p in known.items()}
        top = os.path.basename(os.path.abspath(root))
        layers = {}
        for n, deps in graph.items():
            for d in deps:
                a, b = layer(n, top), layer(d, top)
                if a != b and top not in (a, b):
                    layers.setdefault(a, set()).add(b)
        for kind, g in (("modules", graph), ("subpackages", layers)):
            for comp in cycles(g):
                bad += 1
                edges = [f"{a} -> {b}" for a in comp for b in sorted(g.get(a, ())) if b in comp]
                print(f"{root}: import cycle among {kind}: {', '.join(edges)}")
        print(f"{root}: {len(known)} modules, {sum(map(len, graph.values()))} imports between them, "
              f"{'no cycle' if bad == bad_before else 'cycles found'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""C, C++ and CUDA files and functions no longer than given limits: the lines
of each source file, and of each function body defined in it (the line of
its name to its closing brace), found by matching braces (no compiler: the
comments, strings and preprocessor lines are blanked first; a brace opened at
file, namespace, extern "C" or class scope after a parameter list is a
function's body).

Usage: check_cpp_sizes.py [--max-file-lines N] [--max-function-lines N]
                          [--exclude DIR] [--allow NAME] [--top K] PATH [PATH ...]
  e.g. check_cpp_sizes.py --max-file-lines 600 --max-function-lines 80 runtime kernels apps
PATH is a source file or a folder searched for them (.c .cc .cpp .h .hpp .cu
.cuh .inc). --allow names a file (its path) or a function (PATH:NAME, NAME as
printed, e.g. mega::Model::load) known to be over: still listed but not
failing; one no longer over fails the check, so the list only shrinks.
Prints each file and function over its limit, then the K largest of each
(--top, default 5); exit 1 if any is over and not allowed, else 0.
"""

import re
import sys

from check_py_sizes import files_under, limits_parser, report

EXTENSIONS = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".inc")
TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|R"([^(\s]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
SCOPES = re.compile(r"^(?:template\s*<.*>\s*)?(?:namespace\b|extern\s*\"C\"|(?:class|struct|union)\b)", re.S)
NOT_FUNCTIONS = re.compile(r"^(?:if|for|while|switch|catch|do|else|return|enum)\b")
AFTER_PARAMS = {"const", "override", "noexcept", "final", "mutable", "volatile", "try"}


def blank(text):
    """text with comments, strings, characters and preprocessor lines replaced
    by spaces (newlines kept, so line numbers hold)."""
    def spaces(m):
        s = m.group(0)
        if s.startswith(("//", "/*")):
            return re.sub(r"[^\n]", " ", s)
        return s[0] + re.sub(r"[^\n]", " ", s[1:-1]) + s[-1]  # an empty string literal keeps its quotes
    text = TOKENS.sub(spaces, text)
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.M)


def matching(text, i, open_ch="{", close_ch="}"):
    """The index just past the bracket that closes the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        depth += (text[j] == open_ch) - (text[j] == close_ch)
        if depth == 0:
            return j + 1
    return len(text)


def function_name(head):
    """The qualified name in a function's head (what stands before its
    parameter list), or None if the head is no function's."""
    head = re.sub(r"^template\s*<", "<", head.strip())
    if head.startswith("<"):
        head = head[matching(head, 0, "<", ">"):].strip()
    if NOT_FUNCTIONS.match(head) or "=" in head.split("(")[0] or "(" not in head:
        return None
    m = re.search(r"((?:[\w~]+\s*(?:<[^()]*>)?\s*::\s*)*(?:operator\s*(?:\(\)|[^\s(]+)|~?\w+))\s*\($",
                  head[:head.index("(") + 1] if "operator" not in head else
                  head[:head.index("(", head.index("operator") + len("operator") + 2) + 1])
    return re.sub(r"\s+", "", m.group(1)) if m else None


def functions(text):
    """(name, first line, last line) of each function body in blanked source."""
    out = []
    scope_ends = []  # where the scopes we are in end
    start = 0        # where the current head begins
    i = 0
    while i < len(text):
        c = text[i]
        while scope_ends and i >= scope_ends[-1]:
            scope_ends.pop()
        if c in ";}":
            start = i + 1
        elif c == "{":
            head = text[start:i]
            params_end = head.rfind(")")
            between = head[params_end + 1:] if params_end >= 0 else ""
            word = re.search(r"(\w+)\s*$", head)
            if re.search(r"\)\s*:(?!:)", head) and word and word.group(1) not in AFTER_PARAMS \
                    and not re.search(r"\)\s*$", head):
                i = matching(text, i)  # a member initialised with braces, in a constructor's init list
                continue
            end = matching(text, i)
            if SCOPES.match(head.strip()) and not re.search(r"\)\s*$", head):
                scope_ends.append(end - 1)
                start = i + 1
                i += 1
                continue
            name = function_name(head) if params_end >= 0 and "{" not in between else None
            if name:
                name_at = start + head.find("(")
                first = text.count("\n", 0, name_at) + 1
                out.append((name, first, text.count("\n", 0, end - 1) + 1))
            i = end
            start = i
            continue
        i += 1
    return out


def main(argv=None) -> int:
    args = limits_parser(__doc__, "file", 600).parse_args(argv)
    files, funcs = [], []
    for path in files_under(args.paths, args.exclude, EXTENSIONS):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        files.append((len(text.splitlines()), path))
        funcs += [(last - first + 1, f"{path}:{first} {name}", f"{path}:{name}")
                  for name, first, last in functions(blank(text))]
    return report("file", files, funcs, args.max_file_lines, args.max_function_lines, args.allow, args.top)


if __name__ == "__main__":
    sys.exit(main())

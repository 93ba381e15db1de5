#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every keyword_spotter command the README shows with its output prints that
output: in each fenced block, a line `$ ./build/keyword_spotter ...` followed
by lines up to the next `$ ` or the end of the block is run from the
repository root (./build/ replaced by BUILD_DIR, stdout and stderr together,
as a terminal shows them) and its output compared line by line. A line may
differ only in the last printed digit of its decimal numbers (a logit's sixth
decimal depends on the CPU's vector width, which orders the sums: AVX-512
against AVX2), and a number below 1e-4 written with an exponent (a rounding difference,
such as the self-test's largest logit difference) may be any other such number;
its words and every other digit must be the same. The block after "Output of
the first command:" is what scripts/demo.sh's keyword_spotter lines print
(its $MODEL at the default), checked the same way. Commands
shown without output (a microphone, a file the reader supplies) and other
programs (mega_rtf's timings differ on every run) are not run.

Usage: check_readme_outputs.py [--build BUILD_DIR] [README]   (defaults: build, README.md)
Prints each command whose output differs, with both outputs; exit 1 if any, else 0.
"""

import argparse
import difflib
import os
import re
import subprocess
import sys

PROGRAM = "./build/keyword_spotter "
DECIMAL = re.compile(r"-?\d+\.\d+")
TINY = re.compile(r"\b\d(\.\d+)?e-(0[5-9]|[1-9]\d)\b")  # below 1e-4, with an exponent
DEMO_INTRO = "Output of the first command:"


def same_line(expected, got):
    """The same text, each decimal number within one unit of its last printed digit (the longer of the two)."""
    if expected == got:
        return True
    expected, got = TINY.sub("<1e-4", expected), TINY.sub("<1e-4", got)
    if DECIMAL.sub("#", expected) != DECIMAL.sub("#", got):
        return False
    for e, g in zip(DECIMAL.findall(expected), DECIMAL.findall(got)):
        places = max(len(e.split(".")[1]), len(g.split(".")[1]))
        if abs(float(e) - float(g)) > 1.5 * 10.0 ** -places:
            return False
    return True


def same_output(expected, got):
    return len(expected) == len(got) and all(same_line(e, g) for e, g in zip(expected, got))


def shown_commands(text):
    """(line number, command, expected output lines) for each command with output."""
    out = []
    fenced = False
    current = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            if current:
                out.append(current)
            current = None
            continue
        if not fenced:
            continue
        if line.startswith("$ "):
            if current:
                out.append(current)
            cmd = line[2:]
            current = (n, cmd, []) if cmd.startswith(PROGRAM) else None
        elif current:
            current[2].append(line)
    return [c for c in out if c[2]]


def demo_commands(root):
    """scripts/demo.sh's keyword_spotter lines (the README's first command), its $MODEL at the default."""
    with open(os.path.join(root, "scripts", "demo.sh"), encoding="utf-8") as f:
        text = f.read()
    model = re.search(r"MODEL=\$\{MODEL:-([^}]+)\}", text).group(1)
    return [line.replace('"$MODEL"', model) for line in text.splitlines() if line.startswith(PROGRAM)]


def demo_block(text):
    """(line number, the lines of the fenced block after DEMO_INTRO); None if the README has no such line."""
    lines = text.splitlines()
    if DEMO_INTRO not in lines:
        return None
    start = next(i for i in range(lines.index(DEMO_INTRO), len(lines)) if lines[i].startswith("```")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    return start + 1, lines[start:end]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("readme", nargs="?", default="README.md")
    a = ap.parse_args()
    root = os.path.dirname(os.path.abspath(a.readme))
    with open(a.readme, encoding="utf-8") as f:
        text = f.read()
    commands = shown_commands(text)
    demo = demo_block(text)
    if demo:
        commands.append((demo[0], "; ".join(demo_commands(root)), demo[1]))
    failed = 0
    for n, cmd, expected in commands:
        run = cmd.replace("./build/", os.path.join(os.path.abspath(a.build), ""))
        p = subprocess.run(["bash", "-c", f"{{ {run}\n}} 2>&1"], cwd=root, stdout=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL)
        got = p.stdout.splitlines()
        if not same_output(expected, got):
            failed += 1
            print(f"{a.readme}:{n}: `{cmd}` prints other than the README shows:")
            sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(
                expected, got, "README", "now", lineterm=""))
    print(f"check_readme_outputs: {len(commands)} command(s) with output, {failed} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

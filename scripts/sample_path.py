#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The files one sample's way crosses, from `keyword_spotter scan` to its printed line.

Runs `keyword_spotter scan` under valgrind's callgrind on a short and a long
cut of the same mono 16 kHz recording and lists the repository's source files
whose instruction count grows with the audio's length: the code that runs for
every sample, chunk or hop, not once per file. A build with debug lines is
needed (cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo) so that inlined code is
counted in the file it is written in.

    scripts/sample_path.py BUILD/keyword_spotter [--model FILE] [--wav FILE] [--min IR]
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import wave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# "  1,234 ( 0.01%)  /path/file.cpp:function [binary]" in callgrind_annotate's listing
LINE = re.compile(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S+?):\S")


def cut(src, dst, seconds):
    with wave.open(src, "rb") as w:
        if w.getnchannels() != 1 or w.getframerate() != 16000:
            sys.exit(f"sample_path.py: {src}: a mono 16 kHz WAV file is needed")
        frames = w.readframes(min(w.getnframes(), int(seconds * 16000)))
        params = w.getparams()
    with wave.open(dst, "wb") as o:
        o.setparams(params)
        o.writeframes(frames)


def cost_per_file(ks, model, wav, out):
    # run outside the repository: callgrind_annotate shortens the paths under its working directory
    cwd = os.path.dirname(out)
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", os.path.abspath(ks), "scan", "-m",
                    os.path.abspath(model), wav], check=True, cwd=cwd, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    listing = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", out],
                             check=True, cwd=cwd, capture_output=True, text=True).stdout
    cost = collections.Counter()
    for line in listing.splitlines():
        m = LINE.match(line)
        if m and m.group(2).startswith(ROOT + os.sep):
            cost[os.path.relpath(m.group(2), ROOT)] += int(m.group(1).replace(",", ""))
    return cost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("keyword_spotter", help="a keyword_spotter built with debug lines (RelWithDebInfo)")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "sc10-demo.mega"))
    ap.add_argument("--wav", default=os.path.join(ROOT, "samples", "commands.wav"),
                    help="a mono 16 kHz recording of at least 8 s (default: samples/commands.wav)")
    ap.add_argument("--min", type=int, default=0, help="list only files that grow by more than this many instructions")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        short, long_ = os.path.join(tmp, "short.wav"), os.path.join(tmp, "long.wav")
        cut(a.wav, short, 4.0)
        cut(a.wav, long_, 1e9)
        before = cost_per_file(a.keyword_spotter, a.model, short, os.path.join(tmp, "short.out"))
        after = cost_per_file(a.keyword_spotter, a.model, long_, os.path.join(tmp, "long.out"))
    grown = {f: n - before.get(f, 0) for f, n in after.items() if n - before.get(f, 0) > a.min}
    for f in sorted(grown, key=lambda f: -grown[f]):
        print(f"{grown[f]:>14,}  {f}")
    print(f"{len(grown)} files")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Spot-check what every voice of the pool says for each keyword: the phones its
engine produces for the text it is given (tools/mega_kws_tools/data/voices.py respellings).

  voice_check.py [--markdown]

espeak-ng: its phoneme mnemonics (espeak-ng -x); festival: the segment names of
the synthesized utterance; flite: its phone sequence (-ps). Written into
docs/voices.md with --markdown, next to the notes of what was listened for.
"""

import argparse
import subprocess
import sys
import tempfile

from mega_kws_tools.data import voices as vc


def espeak_phones(voice: vc.Voice, text: str) -> str:
    r = subprocess.run(["espeak-ng", "-q", "-x", "-v", voice.name, text], capture_output=True, text=True, timeout=30)
    return r.stdout.strip() or f"(failed: {r.stderr.strip()[:60]})"


def festival_phones(voice: vc.Voice, texts) -> list:
    esc = [t.replace("\\", "\\\\").replace('"', '\\"') for t in texts]
    script = f"(voice_{voice.name})\n" + "".join(
        f'(set! u (utt.synth (Utterance Text "{t}")))\n'
        '(format t "%l\\n" (mapcar item.name (utt.relation.items u (quote Segment))))\n' for t in esc)
    with tempfile.NamedTemporaryFile("w", suffix=".scm", encoding="utf-8") as f:
        f.write(script)
        f.flush()
        r = subprocess.run(["festival", "--batch", f.name], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("(")]
    if len(lines) != len(texts):
        return [f"(failed: {r.stderr.strip()[:60]})"] * len(texts)
    return [" ".join(p for p in ln.strip("()").replace('"', "").split() if p not in ("pau", "#")) for ln in lines]


def flite_phones(voice: vc.Voice, text: str) -> str:
    r = subprocess.run(["flite", "-voice", voice.name, "-t", text, "-ps", "-o", "/dev/null"],
                       capture_output=True, text=True, timeout=30)
    return " ".join(p for p in r.stdout.split() if p != "pau")


def phones(voice: vc.Voice) -> list:
    texts = [voice.text_for(w) for w in vc.KEYWORDS]
    if voice.engine == "festival":
        return festival_phones(voice, texts)
    if voice.engine == "flite":
        return [flite_phones(voice, t) for t in texts]
    return [espeak_phones(voice, t) for t in texts]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true", help="a markdown table (for docs/voices.md)")
    args = ap.parse_args()
    rows = []
    for v in vc.ALL_VOICES:
        rows.append((v, phones(v)))
    if args.markdown:
        print("| voice | split | script | " + " | ".join(vc.KEYWORDS) + " |")
        print("|---" * (3 + len(vc.KEYWORDS)) + "|")
        for v, ph in rows:
            cells = [f"`{p}`" if p else "" for p in ph]
            print(f"| {v.id} | {vc.split_of(v)} | {v.script} | " + " | ".join(cells) + " |")
    else:
        for v, ph in rows:
            print(f"{v.id:32s} {vc.split_of(v):10s} " + " | ".join(ph))
    return 0


if __name__ == "__main__":
    sys.exit(main())

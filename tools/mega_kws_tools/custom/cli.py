# SPDX-License-Identifier: Apache-2.0
"""python3 -m mega_kws_tools.custom --keyword WORD [--keyword "hey robot" ...] --out my.mega

Turns text into a keyword model that keyword_spotter (classify, scan, listen),
the C API and the Python package use as they use the demo model. The stages
(each with a progress line, each resumable):

  1 words    the keyword's pronunciation (CMU dictionary) and its near misses:
             dictionary words one or two phonemes away; for a phrase, its words
             alone and with one word swapped
  2 render   the keyword said by the project's English text-to-speech voices
             (espeak-ng with its variants, flite, festival) at random rates and
             pitches; the near misses and other words by the same voices;
             --recordings adds your own clips
  3 speech   the front end's view of the project's keyword-free real speech
             and real Speech Commands words, if work/data holds them (cached:
             the same for every keyword)
  4 embed    every word placed after a second of context (real speech, other
             words, noise), augmented (level, noise, a room, speed, pitch,
             formants), seen through the front end: the bundled model's front
             end and encoder (--front-end mega), or the pretrained teacher's
             speech embedding (--front-end teacher)
  5 train    mega: a new head on those embeddings (the encoder stays as it is);
             teacher: new Mega-chunk layers and a head on the teacher's tokens
  6 tune     per keyword the threshold, and one smoothing, whose false alarms on
             held-out keyword-free speech stay under --max-fa-per-hour, as many
             keywords of a held-out voice found as that allows
  7 write    the .mega file, checked by the runtime (self-test, and a held-out
             rendering of each keyword detected)
  8 measure  recall on a text-to-speech voice no stage trained or tuned on, and
             false alarms per hour on real validation speakers' keyword-free speech

The run's folder (--work; by default work/custom/<keywords>-<hash of the
options>, the words and renderings in work/custom/text/, shared by runs that
differ only in later options) keeps each stage's result: run the same command
again and it goes on from the stage it stopped in.
"""

import argparse
import hashlib
import json
import os
import sys

from mega_kws_tools.custom import keywords as kw
from mega_kws_tools.hashing import sha256_of
from mega_kws_tools.custom.paths import DEFAULT_BACKBONE, DEFAULT_STEPS, ROOT, STAGES



def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m mega_kws_tools.custom", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keyword", action="append", default=[], metavar="TEXT",
                    help="a keyword or phrase of 1-4 English words (repeatable: one model spots them all)")
    ap.add_argument("--out", required=True, help="the .mega file to write")
    ap.add_argument("--recordings", metavar="DIR", help="your own clips of the keyword, any format sox reads "
                    "(with several keywords: DIR/<keyword>/); each weighs as much as 8 renderings")
    ap.add_argument("--front-end", choices=["mega", "teacher"], default="mega",
                    help="what the new model learns on: 'mega' (default), the front end and encoder of --backbone, "
                    "frozen, with a new head; 'teacher', the pretrained speech embedding (--teacher), frozen, with "
                    "the Mega-chunk layers of --backbone trained on and a new head (docs/custom-keywords.md "
                    "compares them: neither finds more of every word)")
    ap.add_argument("--backbone", help="the model the new one starts from: with --front-end mega, its front end and "
                    "encoder are kept (default: the bundled models/sc10-demo.mega); with teacher, a teacher-embedding "
                    "model whose Mega-chunk layers are trained on (default: models/sc10-teacher.mega)")
    ap.add_argument("--teacher", default=os.path.join(ROOT, "work", "teacher"),
                    help="with --front-end teacher: the teacher's two ONNX files (default: %(default)s; "
                    "python3 -m mega_kws_tools.teacher.fetch puts them there)")
    ap.add_argument("--data", default=os.path.join(ROOT, "work", "data"),
                    help="the project's real data (tools/scripts/reproduce_training.sh data); used when present")
    ap.add_argument("--work", help="the run's folder (default: work/custom/<keywords>-<hash of the options>)")
    ap.add_argument("--renders", type=int, default=240, help="renderings of each keyword (default 240)")
    ap.add_argument("--copies", type=int, default=4, help="placements of each rendering (default 4)")
    ap.add_argument("--near", type=int, default=60, help="near-miss texts per keyword (default 60)")
    ap.add_argument("--held-out", type=int, default=40, help="renderings of each keyword by each held-out voice")
    ap.add_argument("--voices", type=int, default=0, help="use only the first N training voices (0: all)")
    ap.add_argument("--steps", type=int, help="training steps (default: 3000 of the head with --front-end mega, "
                    "1500 of the layers and head with teacher)")
    ap.add_argument("--max-fa-per-hour", type=float, default=1.0,
                    help="false alarms per keyword-free hour the defaults may cost (default 1.0)")
    ap.add_argument("--threads", type=int, default=2, help="text-to-speech processes and torch threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keyword-spotter", default="", help="the runtime program (default: build/ or PATH)")
    ap.add_argument("--stop-after", choices=STAGES, help="stop after this stage (a later run resumes)")
    args = ap.parse_args(argv)
    args.backbone = args.backbone or DEFAULT_BACKBONE[args.front_end]
    args.steps = args.steps if args.steps is not None else DEFAULT_STEPS[args.front_end]
    for name in ("renders", "copies", "held_out", "steps", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if not args.max_fa_per_hour > 0:
        ap.error("--max-fa-per-hour must be positive")
    return args


def text_hash(args, labels) -> str:
    """What the words and render stages depend on (their results are shared by
    runs that differ only in later options)."""
    keys = dict(labels=labels, renders=args.renders, near=args.near, held_out=args.held_out, voices=args.voices,
                seed=args.seed)
    return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:12]


def options_hash(args, labels) -> str:
    keys = dict(text=text_hash(args, labels), copies=args.copies, steps=args.steps, fa=args.max_fa_per_hour,
                recordings=recordings_listing(args.recordings))
    keys["backbone"] = sha256_of(args.backbone)
    if args.front_end != "mega":  # (mega runs keep the folders they had before there was a choice)
        keys["front_end"] = args.front_end
    return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:12]


def recordings_listing(folder):
    """What a run's results depend on in --recordings: each file's path, size and time."""
    if not folder:
        return []
    out = []
    for d, _, files in os.walk(folder):
        for f in sorted(files):
            st = os.stat(os.path.join(d, f))
            out.append([os.path.relpath(os.path.join(d, f), folder), st.st_size, int(st.st_mtime)])
    return sorted(out)


def slug(labels) -> str:
    return "-".join(label.replace(" ", "_").replace("'", "") for label in labels)[:40]


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        labels = kw.check_keywords(args.keyword)
    except kw.KeywordError as e:
        print(f"mega_kws_tools.custom: {e}", file=sys.stderr)
        return 2
    for path, what in ((args.backbone, "--backbone"), (args.recordings, "--recordings")):
        if path and not os.path.exists(path):
            print(f"mega_kws_tools.custom: {what} {path}: no such file or folder", file=sys.stderr)
            return 2
    from mega_kws_tools.custom.runner import Run  # torch and the rest load only for a real run
    base = os.path.join(ROOT, "work", "custom")
    work = args.work or os.path.join(base, f"{slug(labels)}-{options_hash(args, labels)}")
    text = os.path.join(work, "text") if args.work else os.path.join(base, "text", f"{slug(labels)}-{text_hash(args, labels)}")
    try:
        return Run(args, labels, work, text).run_all()
    except kw.KeywordError as e:
        print(f"mega_kws_tools.custom: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nstopped; run the same command again to resume from {work}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())



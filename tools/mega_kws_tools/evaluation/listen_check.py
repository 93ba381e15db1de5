#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Listen to what every voice of the pool says, with an independent recognizer, and
put the model's answers next to it.

  listen_check.py --out DIR [--per-keyword 6] [--near 20] [--splits training,validation]
                  [--ks build/keyword_spotter --model models/sc10-demo.mega] [--real DIR] [--jobs 2]

voice_check.py lists the phones an engine *means* to say; this renders each voice's
keywords (clean: no noise, reverberation or warp) and asks a listener trained on real
English speech, PocketSphinx with Debian's `pocketsphinx-en-us` acoustic model, which
word of a closed list it hears. The list holds the ten keywords and every other word
make_sc10.py renders (near misses such as *pup*, *of*, *now*; the other Speech Commands
words; common words), so a rendering of *up* that sounds like *off* or *app* is heard as
that. Near-miss words are rendered too (`--near`, Latin-script voices only, as
make_sc10.py does), to see which of them a listener takes for a keyword.

With --ks and --model, the model classifies the same clips (`keyword_spotter classify`),
so its errors can be split into those on clips the listener heard right and those on
clips the listener heard wrong. With --real, the real Speech Commands clips of the
*validation* split in that folder (fetch_real_sc.py's output) are heard too: how often
the listener gets a real person's keyword right, its baseline.

Only the training and validation voices are rendered by default; the testing voices
are left alone, so nothing here can be tuned to them (--splits testing is refused).
Reserved voices cannot be rendered (make_sc10.synthesize refuses them).

Writes DIR/clips/..., DIR/results.csv (one row per clip) and DIR/summary.md.
Needs: python3-pocketsphinx and pocketsphinx-en-us (apt), besides make_sc10.py's tools.
"""

import argparse
import collections
import csv
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from mega_kws_tools.audio import plain_pcm_16k, read_wav, write_wav
from mega_kws_tools.data import layout
from mega_kws_tools.data import make_sc10 as ms
from mega_kws_tools.data import voices as vc
from mega_kws_tools.evaluation import evaluate

KEYWORDS = layout.KEYWORDS
SEED_CODE = 2001  # SeedSequence code of this tool's draws (make_sc10 uses 0-11 and 1000-1002)
S = {"seed": 1, "words": []}  # set by main() before the worker processes fork


def listener_words(dict_path: str) -> list:
    """Every word make_sc10 renders that the pronouncing dictionary has, keywords first."""
    with open(dict_path, encoding="utf-8", errors="replace") as f:
        known = {ln.split()[0] for ln in f if ln.strip()}
    others = sorted(set(ms.UNKNOWN_WORDS) | set(ms.CONFUSABLE))
    return KEYWORDS + [w for w in others if w in known and w not in KEYWORDS]


class Listener:
    """PocketSphinx restricted to one word of `words` (a JSGF grammar), 0.4 s of silence either side."""

    def __init__(self, words: list):
        import pocketsphinx as ps
        md = ps.get_model_path()
        with tempfile.TemporaryDirectory(prefix="listen_") as tmp:  # the decoder reads the grammar once
            gram = os.path.join(tmp, "words.gram")
            with open(gram, "w") as f:
                f.write("#JSGF V1.0;\ngrammar words;\npublic <w> = " + " | ".join(words) + " ;\n")
            c = ps.Decoder.default_config()
            c.set_string("-hmm", os.path.join(md, "en-us"))
            c.set_string("-dict", os.path.join(md, "cmudict-en-us.dict"))
            c.set_string("-jsgf", gram)
            c.set_string("-logfn", os.devnull)
            self.decoder = ps.Decoder(c)

    def hear(self, pcm16: bytes) -> str:
        pad = b"\0" * (2 * 6400)
        d = self.decoder
        d.start_utt()
        d.process_raw(pad + pcm16 + pad, False, True)
        d.end_utt()
        h = d.hyp()
        return h.hypstr.strip() if h is not None and h.hypstr.strip() else "(nothing)"


def read_pcm16(path: str) -> bytes:
    """A clip as 16 kHz mono int16 bytes (sox converts anything else)."""
    if plain_pcm_16k(path):
        return read_wav(path).tobytes()
    r = subprocess.run(["sox", "-V1", "-R", path, "-t", "raw", "-e", "signed", "-b", "16", "-c", "1",
                        "-r", str(ms.SR), "-"], capture_output=True, timeout=60, check=True)
    return r.stdout


def setup(out: str, seed: int):
    """make_sc10's renderer state for render_task (festival kept running: this is analysis, not data)."""
    S["seed"] = seed
    os.makedirs(out, exist_ok=True)
    ms.G["out"] = out
    ms.G["festival"] = "pipe"
    ms.G["tmp_root"] = tempfile.mkdtemp(prefix="listen_check_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ms.G["variants"] = [v for v in ms.espeak_variants() if not vc.is_reserved(v)]


def render_task(task):
    """(voice id, split, label, word, index) -> a row with the clip's path, or None if it never rendered."""
    voice_id, split, label, word, index = task
    v = next(x for x in vc.ALL_VOICES if x.id == voice_id)
    rng = np.random.default_rng(np.random.SeedSequence([S["seed"], SEED_CODE, vc.ALL_VOICES.index(v), index]))
    ms.G["voices"] = {split: [v]}
    for _ in range(4):
        spk = ms.draw_speaker(rng, split)
        x = ms.trim(ms.synthesize(spk, v.text_for(word)))
        if len(x) < ms.MIN_WORD_S * ms.SR:
            continue
        x = x / max(ms.peak(x), 1e-6) * 0.5
        rel = os.path.join("clips", re.sub(r"[^A-Za-z0-9_.-]+", "_", voice_id), f"{label}_{word}_{index}.wav")
        path = os.path.join(ms.G["out"], rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_wav(path, ms.to_pcm16(rng, x))
        return dict(voice=voice_id, split=split, label=label, word=word, path=path,
                    variant=spk["variant"], rate=spk["rate"], pitch=spk["pitch"])
    return None


def hear_task(paths):
    """(the word heard among the keywords alone, the word heard among all the words) per clip."""
    forced = Listener(KEYWORDS)
    open_ = Listener(S["words"])
    out = []
    for p in paths:
        raw = read_pcm16(p)
        out.append((forced.hear(raw), open_.hear(raw)))
    return out


def real_rows(real: str) -> list:
    rows = []
    for rel in [rel for rel, sp in layout.clip_splits(real).items() if sp == "validation"]:
        word = rel.split("/")[0]
        rows.append(dict(voice="real (validation speakers)", split="validation",
                         label=word if word in KEYWORDS else "_unknown_", word=word,
                         path=os.path.join(real, rel), variant="", rate="", pitch=""))
    return rows


def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "-"


def _stats(rs: list, has_model: bool) -> str:
    kw = [r for r in rs if r["label"] in KEYWORDS]
    near = [r for r in rs if r["label"] not in KEYWORDS]
    forced = [r for r in kw if r["forced"] == r["word"]]
    heard = [r for r in kw if r["heard"] == r["word"]]
    near_kw = [r for r in near if r["heard"] in KEYWORDS]
    line = f" {len(kw)} | {pct(len(forced), len(kw))} | {pct(len(heard), len(kw))} | {pct(len(near_kw), len(near))} |"
    if has_model:
        right = [r for r in kw if r["model"] == r["label"]]
        wrong_f = [r for r in kw if r["forced"] != r["word"]]
        a = sum(r["model"] == r["label"] for r in forced)
        b = sum(r["model"] == r["label"] for r in wrong_f)
        line += f" {pct(len(right), len(kw))} | {pct(a, len(forced))} / {pct(b, len(wrong_f))} |"
    return line


def summarize(rows: list, has_model: bool) -> str:
    """Markdown: per voice, per split and (validation voices) per keyword."""
    head = ("keywords | listener, keywords only: right | listener, all words: right | "
            "near misses heard as a keyword |" + (" model right | model right where the listener (keywords only) "
                                                   "was right / wrong |" if has_model else ""))
    rule = "|---|---|---|---|---|" + ("---|---|" if has_model else "")
    out = ["| voice | split | " + head, rule + "---|"]
    by_voice = collections.defaultdict(list)
    for r in rows:
        by_voice[(r["split"], r["voice"])].append(r)
    for (split, voice), rs in sorted(by_voice.items()):
        out.append(f"| {voice} | {split} |" + _stats(rs, has_model))
    out += ["", "| clips | " + head, rule]
    groups = collections.defaultdict(list)
    for r in rows:
        groups["real speakers (validation split)" if r["voice"].startswith("real") else f"{r['split']} voices"].append(r)
    for name, rs in sorted(groups.items()):
        out.append(f"| {name} |" + _stats(rs, has_model))
    for name, rs in sorted(groups.items()):
        out += ["", f"{name}, per keyword:", "", "| keyword | " + head + " listener (keywords only) heard instead |",
                rule + "---|"]
        for w in KEYWORDS:
            kr = [r for r in rs if r["word"] == w]
            wrong = collections.Counter(r["forced"] for r in kr if r["forced"] != w).most_common(3)
            out.append(f"| {w} |" + _stats(kr, has_model) + " " + ", ".join(f"{k} {n}" for k, n in wrong) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (clips, results.csv, summary.md)")
    ap.add_argument("--per-keyword", type=int, default=6, help="renderings of each keyword per voice [6]")
    ap.add_argument("--near", type=int, default=20, help="near-miss words per Latin-script voice [20]")
    ap.add_argument("--splits", default="training,validation", help="voice splits to render [training,validation]")
    ap.add_argument("--ks", help="keyword_spotter, to put the model's answers next to the listener's")
    ap.add_argument("--model", help="the .mega model for --ks")
    ap.add_argument("--real", help="a fetch_real_sc.py folder: hear its validation-split clips too")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    splits = [s for s in args.splits.split(",") if s]
    if "testing" in splits or any(s not in vc.SPLITS for s in splits):
        sys.exit("listen_check: --splits takes training and/or validation (the testing voices are left alone)")
    if bool(args.ks) != bool(args.model):
        sys.exit("listen_check: --ks and --model go together")
    try:
        import pocketsphinx  # noqa: F401
    except ImportError:
        sys.exit("listen_check: needs PocketSphinx (apt-get install python3-pocketsphinx pocketsphinx-en-us)")

    setup(args.out, args.seed)
    import pocketsphinx as ps
    S["words"] = listener_words(os.path.join(ps.get_model_path(), "cmudict-en-us.dict"))

    tasks = []
    for v in vc.VOICES:
        split = vc.split_of(v)
        if split not in splits:
            continue
        i = 0
        for word in KEYWORDS:
            for _ in range(args.per_keyword):
                tasks.append((v.id, split, word, word, i))
                i += 1
        if v.script in vc.LATIN:
            rng = np.random.default_rng(np.random.SeedSequence([args.seed, SEED_CODE, vc.ALL_VOICES.index(v)]))
            for _ in range(args.near):
                word = str(ms.CONFUSABLE[int(rng.integers(len(ms.CONFUSABLE)))])
                while v.reads_as_keyword(word) or word not in S["words"]:
                    word = str(ms.CONFUSABLE[int(rng.integers(len(ms.CONFUSABLE)))])
                tasks.append((v.id, split, "_unknown_", word, i))
                i += 1
    ctx = mp.get_context("fork")
    try:
        with ctx.Pool(args.jobs) as pool:
            rows = [r for r in pool.map(render_task, tasks, chunksize=8) if r is not None]
    finally:
        ms.FESTIVAL.close()
        shutil.rmtree(ms.G["tmp_root"], ignore_errors=True)
    print(f"rendered {len(rows)} of {len(tasks)} clips", flush=True)
    if args.real:
        rows += real_rows(args.real)
    paths = [r["path"] for r in rows]
    chunks = [paths[i::args.jobs] for i in range(args.jobs)]
    with ctx.Pool(args.jobs) as pool:
        heard = pool.map(hear_task, chunks)
    by_path = {}
    for ch, hs in zip(chunks, heard):
        by_path.update(zip(ch, hs))
    for r in rows:
        r["forced"], r["heard"] = by_path[r["path"]]
    if args.ks:
        labels = {o["file"]: o["label"] for o in evaluate.classify_clips(args.ks, args.model, paths) if "label" in o}
        for r in rows:
            r["model"] = labels.get(r["path"], "(failed)")
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    text = summarize(rows, bool(args.ks))
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

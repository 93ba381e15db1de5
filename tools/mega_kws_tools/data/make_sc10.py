#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Generate a synthetic Speech Commands-style keyword dataset (SC10 + _unknown_ + _silence_).

  make_sc10.py --out DIR [--seed 1] [--per-word 1000] [--unknown 3000] [--silence 1200] [--jobs 2]

Layout (the same as Speech Commands v0.02, so tools/mega_kws_tools/training/train.py reads it as is):

  DIR/<label>/<name>.wav       1.000 s, 16 kHz, mono, 16-bit PCM
  DIR/validation_list.txt      "label/name.wav" per line (~10 %)
  DIR/testing_list.txt         "label/name.wav" per line (~10 %); every other clip is training
  DIR/manifest.csv             one row per clip: how it was made (see MANIFEST_FIELDS)
  DIR/README.txt               the generation command, tool versions and counts

Labels: yes no up down left right on off stop go, _unknown_ (the other Speech
Commands words plus near-miss and common words, so that a live detector learns
to stay quiet on other speech) and _silence_ (noise, hum, near-silence, clicks;
no speech).

Speech sources: the voice pool of tools/mega_kws_tools/data/voices.py (ONLY those; the reserved
voices named there are refused by name and judge the model from outside):
  * espeak-ng, its English voices and the voices of 38 other languages reading
    the English words (accents), each clip with a random variant from espeak-ng's
    variant folder (voices/!v: m1..m8, f1..f5, klatt*, whisper, croak, ...) or
    none, rate -s 110..220, pitch -p 20..80;
  * flite kal (8 kHz) and kal16, duration_stretch 0.8..1.3, int_f0_target_mean 90..160;
  * festival: kal_diphone and 13 non-English voices (Czech dita, krb (a child),
    machac, ph; Catalan ona; Italian lp, pc; Finnish lj, mv; Russian; the Hindi,
    Marathi and Telugu NSK voices), Duration_Stretch 0.8..1.3.
  Non-English voices read the keywords through phonetic respellings
  (voices.RESPELL, checked with tools/mega_kws_tools/data/voice_check.py: docs/voices.md).
  Half the renderings are warped (resampled 0.88..1.15x: pitch, formants and
  tempo together) before trimming.

Per speech clip: synthesize -> resample to 16 kHz (sox) -> trim leading and
trailing silence (energy based) -> if the word is longer than 0.95 s, speed it
up with sox `tempo` (pitch kept; at most 1.6x, otherwise re-drawn) -> place at
a random offset inside the second (the whole word fits, >= 20 ms from the
edges where it is short enough) -> reverberation
(p=0.3; exponentially decaying noise impulse response, RT60 0.1..0.6 s) ->
band-limiting (p=0.3; telephone 300-3400 Hz or low-pass 2.5-6 kHz, FFT-domain
mask with raised-cosine edges) -> background noise (p=0.7; white, pink,
brown, babble or 50/60 Hz hum with harmonics at an SNR of 0, 5, 10, 20 or 30 dB;
SNR = speech RMS over the word / noise RMS) -> speech peak scaled to -20..-3 dBFS
-> TPDF-dithered 16-bit quantization (the mix is kept inside [-1, 1)).
Babble is the sum of 4..8 quiet, unrelated, overlapping TTS words drawn from a
bank rendered once per run (never keywords; 300 words, --babble-words).

Silence clips: white / pink / brown noise at -60..-20 dBFS RMS, hum, noise+hum,
near-digital silence (tiny dither), optional band-limiting, and occasionally
clicks or short noise bursts.

Determinism: every clip is drawn from its own generator
np.random.default_rng(SeedSequence([seed, label_index, clip_index])), so the
output does not depend on --jobs and clip k of a label is the same whatever
--per-word / --unknown / --silence are (prefix-stable). The babble bank and
the set of usable variants are deterministic too (same tool versions assumed).
--festival pipe (not the default) keeps one festival process per voice and
worker running instead of starting text2wave for every word
(tools/mega_kws_tools/data/festival_pipe.py): the near-miss command of docs/models.md made its
2,384 held-out clips in 124 s with it, against 13 minutes with text2wave (an
earlier session, the same 2 cores). Festival carries some state from word to
word: 52 of those 2,384 clips differed from text2wave's, mostly Finnish mv
words whose quiet last 0.1 s came out silent. Use it for training clips only,
never for the clips that measure models.

Splits are voice-disjoint: every voice group (voices.py: one engine + voice, or
the voices of one recorded speaker) belongs to one split, and a clip draws its
split first (10 % validation, 10 % testing) and then a voice of that split. A
clip is named "<spk8>_<index>_nohash_0.wav" (spk8: the first 8 hex digits of
sha1("engine:voice:variant"); index: the clip's index within its label); the
list files hold the splits, and tools/mega_kws_tools/data/check_splits.py verifies them.

--near-miss N adds N more _unknown_ clips, each a near miss of a keyword
(CONFUSABLE: "yet", "nope", "goal", "good", "call", ...) said by a Latin-script
voice of the clip's split, named "<spk8>_n<index>_nohash_0.wav" and drawn from
generators of their own (label code EXTRA[NEAR]), so they leave every other clip
as it was: a folder of them alone (--per-word 0 --unknown 0 --silence 0) can be
merged into an existing dataset with tools/mega_kws_tools/data/merge_sets.py.

--only-split SPLIT makes only the clips that fall in SPLIT (scanning clip indices
from --first-index up; the clip at an index is the one a full run makes there):
for example more clips of the validation voices, past the indices of an
existing run with the same --seed, to merge into it.

--accent N adds N more keyword clips in the same way (label code EXTRA[ACCENT],
"<spk8>_a<index>_nohash_0.wav"): a keyword drawn at random, said by an English
espeak-ng voice of the clip's split through one of its accented pronunciations
(voices.ACCENT_PHONEMES, given as phonemes, [[...]]).

Resuming: clips are made in shards of SHARD whose results are kept in
OUT/parts/; the same command run again after an interruption continues after
the last finished shard.

manifest.csv columns: path, label, split, engine (espeak-ng | flite | noise),
voice, variant, rate (espeak-ng: words per minute; flite: duration_stretch),
pitch (espeak-ng: -p 0..99; flite: int_f0_target_mean in Hz), snr_db (empty =
no added noise), reverb ("rt60=0.32,wet=0.55" or empty), band ("tel",
"lp4200" or empty), level_dbfs (speech clips: peak of the speech part; silence
clips: RMS of the clip), offset_s (where the trimmed word starts), and extra
columns word, word_dur_s (the trimmed word spans [offset_s, offset_s +
word_dur_s]), tempo (sox tempo factor, 1 = none), noise (noise type), text
(what the voice was given to read: the word or its respelling), warp (the
resampling warp factor, 1 = none).

Code: this module is the command (its options, the worker pool, the shards, the lists and
README.txt); sc10_recipe.py holds the labels, words, numbers and clip names above,
sc10_audio.py the signal helpers, sc10_render.py the voices, the text-to-speech and the
shared state G the worker processes fork with, sc10_clips.py the clips and the probes.

Needs: /usr/bin/python3 with numpy, and the espeak-ng, flite, festival and sox
commands with the festvox voices above (scripts/setup.sh installs them).
"""

import argparse
import csv
import json
import multiprocessing as mp
import os
import shlex
import shutil
import sys
import tempfile
import time

import numpy as np

from mega_kws_tools.data import voices as vc
from mega_kws_tools.data.layout import KEYWORDS, SILENCE, UNKNOWN
from mega_kws_tools.data.sc10_clips import espeak_variants, run_probes, run_tasks, tool_versions
from mega_kws_tools.data.sc10_recipe import (ACCENT, BABBLE_BANK_SIZE, LABELS, MANIFEST_FIELDS, MIN_WORD_S, NEAR,
                                             RENDER_TIMEOUT_S, SHARD, is_accent, is_near_miss)
from mega_kws_tools.data.sc10_render import FESTIVAL, G, indices_of_split, split_of_clip
# What other tools take from here (evaluation/listen_check.py and evaluate.py, data/make_stream.py):
from mega_kws_tools.data.sc10_audio import colored_noise, db, hum, peak, rms, to_pcm16, trim  # noqa: F401
from mega_kws_tools.data.sc10_recipe import CONFUSABLE, SC_OTHER, SR, UNKNOWN_WORDS  # noqa: F401
from mega_kws_tools.data.sc10_render import draw_speaker, synthesize  # noqa: F401


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (created; existing clips are overwritten)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-word", type=int, default=1000, help="clips per keyword")
    ap.add_argument("--unknown", type=int, default=3000, help="_unknown_ clips")
    ap.add_argument("--silence", type=int, default=1200, help="_silence_ clips")
    ap.add_argument("--near-miss", type=int, default=0, metavar="N",
                    help="N more _unknown_ clips, each a near miss of a keyword (CONFUSABLE) said by a "
                         "Latin-script voice; drawn from their own seeds, so adding them changes no other clip")
    ap.add_argument("--accent", type=int, default=0, metavar="N",
                    help="N more keyword clips, each said by an English espeak-ng voice in an accent "
                         "(voices.ACCENT_PHONEMES); drawn from their own seeds like --near-miss")
    ap.add_argument("--pool", choices=sorted(vc.POOLS), default="base",
                    help="voices: base (the first pool: training, validation and testing voices) or more "
                         "(voices.MORE_VOICES, added later: training voices only, so every clip is training; "
                         "merge the folder into a base one with merge_sets.py)")
    ap.add_argument("--only-split", choices=vc.SPLITS, default=None,
                    help="make only clips whose voice falls in this split: each count is then a number of "
                         "clips of the split, found by scanning clip indices from --first-index up")
    ap.add_argument("--first-index", type=int, default=0, metavar="K",
                    help="with --only-split: scan from clip index K, past the clips an earlier run made "
                         "with the same --seed, so that the new clips are new (and merge without clashes)")
    ap.add_argument("--keep-splits", default="", metavar="SPLIT,...",
                    help="make only the clips of these splits (training, validation, testing; comma-separated) "
                         "among those the same command without it makes: the same clips, byte for byte, so "
                         "folders made with complementary --keep-splits merge (merge_sets.py) into the full "
                         "set. For rebuilding the held-out splits alone (a fifth of the time)")
    ap.add_argument("--voices", default="", metavar="ID,...",
                    help="with --only-split: draw only these voices of that split (engine:name, as "
                         "manifest.csv and the README name them, comma-separated), for more clips of "
                         "voices the pool has few of (festival's female and child voices)")
    ap.add_argument("--babble-words", type=int, default=BABBLE_BANK_SIZE, metavar="N",
                    help="words in the babble bank, rendered before any clip (about 0.8 s each at one job). "
                         "Fewer makes small runs such as the tests fast, but clips with babble then differ "
                         "from a full run's; 0: pink noise where babble would be (default %(default)s)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--festival", choices=["text2wave", "pipe"], default="text2wave",
                    help="how festival voices render: text2wave (default: a new festival process per word) or "
                         "pipe (one festival process per voice and worker, kept running: about 6 times faster, "
                         "but a few words come out with their quiet end cut; training clips only: "
                         "tools/mega_kws_tools/data/festival_pipe.py)")
    return ap.parse_args()


def check_args(args):
    """Exits naming the first option that is out of range or does not combine;
    returns (only_voices, keep)."""
    if args.babble_words < 0:
        sys.exit(f"make_sc10: --babble-words must be 0 or more, not {args.babble_words}")
    only_voices = [v for v in args.voices.split(",") if v]
    if only_voices:
        if not args.only_split:
            sys.exit("make_sc10: --voices goes with --only-split")
        ids = {v.id: v for v in vc.POOLS[args.pool]}
        for vid in only_voices:
            if vid not in ids:
                sys.exit(f"make_sc10: --voices: '{vid}' is not a voice of the {args.pool} pool "
                         f"(for example {next(iter(ids))})")
            if vc.split_of(ids[vid]) != args.only_split:
                sys.exit(f"make_sc10: --voices: {vid} is a {vc.split_of(ids[vid])} voice, "
                         f"not a {args.only_split} one")
    keep = [sp for sp in args.keep_splits.split(",") if sp]
    bad = [sp for sp in keep if sp not in vc.SPLITS]
    if bad:
        sys.exit(f"make_sc10: --keep-splits: {bad[0]!r} is not a split ({', '.join(vc.SPLITS)})")
    if keep and args.only_split:
        sys.exit("make_sc10: --keep-splits and --only-split do not go together")
    if args.first_index and not args.only_split:
        sys.exit("make_sc10: --first-index goes with --only-split")
    if args.only_split and args.pool == "more":
        sys.exit("make_sc10: --only-split goes with --pool base (every --pool more clip is training)")
    if args.first_index < 0:
        sys.exit("make_sc10: --first-index must be >= 0")
    if args.pool == "more" and args.silence:
        sys.exit("make_sc10: --pool more makes speech clips only; give --silence 0 (the base pool's "
                 "_silence_ clips have no voice)")
    for tool in ("espeak-ng", "flite", "sox", "text2wave"):
        if shutil.which(tool) is None:
            sys.exit(f"make_sc10: '{tool}' not found (scripts/setup.sh installs the voices: "
                     "apt-get install espeak-ng flite sox festival festvox-...)")
    return only_voices, keep


def probe_voices(ctx, args):
    """Renders a word in every voice and variant, keeps in G those that render; returns the skipped ones."""
    # 1) probe voices and variants; drop the ones that do not render
    variants = espeak_variants()
    pool_voices = vc.POOLS[args.pool]
    G["training_only"] = args.pool == "more"
    probes = [("probe", 0, (v.engine, v.name, "", v.text_for("stop")), RENDER_TIMEOUT_S) for v in pool_voices]
    probes += [("probe", 0, ("espeak-ng", "en-us", v, "seven"), RENDER_TIMEOUT_S) for v in variants
               if not vc.is_reserved(v)]
    pool = ctx.Pool(args.jobs) if args.jobs > 1 else None
    res = run_probes(pool, probes)
    if pool is not None:
        pool.close()
        pool.join()
    bad = [r[0] for r in res if r[1] < MIN_WORD_S]
    for b in bad:
        print(f"skipped (does not render): {b[0]} {b[1]}{'+' + b[2] if b[2] else ''}", flush=True)
    usable = [v for v in pool_voices if (v.engine, v.name, "") not in bad]
    G["voices"] = {sp: vc.voices_of(sp, usable) for sp in vc.SPLITS}
    G["variants"] = [v for v in variants if not vc.is_reserved(v) and ("espeak-ng", "en-us", v) not in bad]
    for sp in vc.SPLITS:
        if not G["voices"][sp] and not (G["training_only"] and sp != "training"):
            sys.exit(f"make_sc10: no {sp} voice renders")
        print(f"{sp} voices ({len(G['voices'][sp])}): {' '.join(v.id for v in G['voices'][sp])}", flush=True)
    print(f"espeak-ng variants: {len(G['variants'])}", flush=True)
    return bad


def make_bank(ctx, args, only_voices, t0):
    """The babble bank (the parent keeps it; the clip workers inherit it by fork)."""
    # 2) babble bank (parent keeps it; the clip workers inherit it by fork)
    pool = ctx.Pool(args.jobs) if args.jobs > 1 else None
    bank = list(run_tasks(pool, [("bank", args.seed, None, i) for i in range(args.babble_words)], 4))
    if pool is not None:
        pool.close()
        pool.join()
    G["bank"] = [b for b in bank if b is not None]
    print(f"babble bank: {len(G['bank'])} words ({time.time() - t0:.0f} s)", flush=True)
    if only_voices:  # the babble above is drawn from every training voice, the clips from these
        G["voices"][args.only_split] = [v for v in G["voices"][args.only_split] if v.id in only_voices]
        if len(G["voices"][args.only_split]) < len(only_voices):
            sys.exit("make_sc10: --voices: a voice given does not render")
        print(f"clips of: {' '.join(v.id for v in G['voices'][args.only_split])}", flush=True)


def clip_tasks(args, keep, only_voices):
    """The clips to make, as tasks, and the key that tells whether a shard kept
    in OUT/parts belongs to this run."""
    # 3) the clips, in shards whose results are kept in OUT/parts: an interrupted
    # run started again with the same arguments continues after the last shard.
    counts = {k: args.per_word for k in KEYWORDS}
    counts[UNKNOWN], counts[SILENCE] = args.unknown, args.silence
    if args.near_miss:
        counts[NEAR] = args.near_miss
    if args.accent:
        counts[ACCENT] = args.accent
    order = LABELS + [NEAR, ACCENT]
    if args.only_split:
        tasks = [("clip", args.seed, lab, i) for lab in order
                 for i in indices_of_split(args.seed, lab, args.only_split, args.first_index, counts.get(lab, 0))]
        counts = {lab: n for lab, n in counts.items() if n}
    else:
        tasks = [("clip", args.seed, lab, i) for lab in order for i in range(counts.get(lab, 0))
                 if not keep or split_of_clip(args.seed, lab, i) in keep]
    # interleave labels so that progress and load are even
    tasks.sort(key=lambda t: (t[3] / max(counts[t[2]], 1), order.index(t[2])))
    run_key = f"seed={args.seed} counts={sorted(counts.items())}" + ("" if args.pool == "base" else f" pool={args.pool}")
    if args.only_split:
        run_key += f" only={args.only_split} first={args.first_index}"
    if only_voices:
        run_key += f" voices={','.join(only_voices)}"
    if keep:
        run_key += f" keep={','.join(sorted(keep))}"
    return tasks, run_key


def make_clips(ctx, args, tasks, run_key, out):
    """The clips, in shards whose results are kept in OUT/parts: an interrupted
    run started again with the same arguments continues after the last shard."""
    parts = os.path.join(out, "parts")
    os.makedirs(parts, exist_ok=True)
    rows, errors, fails = [], [], {}
    t1, done = time.time(), 0
    pool = ctx.Pool(args.jobs) if args.jobs > 1 else None
    for first in range(0, len(tasks), SHARD):
        path = os.path.join(parts, f"{first // SHARD:05d}.json")
        part = None
        if os.path.exists(path):
            with open(path) as f:
                part = json.load(f)
            if part.get("key") != run_key:
                part = None
        if part is None:
            part = {"key": run_key, "rows": [], "errors": [], "fails": []}
            for r in run_tasks(pool, tasks[first:first + SHARD], 8):
                if r["row"] is not None:
                    part["rows"].append(r["row"])
                if r["error"]:
                    part["errors"].append(r["error"])
                part["fails"] += r["fails"]
            with open(path + ".tmp", "w") as f:
                json.dump(part, f)
            os.replace(path + ".tmp", path)
            done += min(SHARD, len(tasks) - first)
            el = time.time() - t1
            left = len(tasks) - first - SHARD
            print(f"  {min(first + SHARD, len(tasks))}/{len(tasks)} clips, {el:.0f} s, "
                  f"eta {el / done * max(0, left):.0f} s", flush=True)
        rows += part["rows"]
        errors += part["errors"]
        for spk, why in part["fails"]:
            fails.setdefault(spk, {}).setdefault(why, 0)
            fails[spk][why] += 1
    if pool is not None:
        pool.close()
        pool.join()
    return rows, errors, fails


def write_lists(out, rows):
    """The split lists and manifest.csv."""
    rows.sort(key=lambda r: (LABELS.index(r["label"]), r["path"]))
    for split, fname in (("validation", "validation_list.txt"), ("testing", "testing_list.txt")):
        with open(os.path.join(out, fname), "w") as f:
            f.writelines(r["path"] + "\n" for r in rows if r["split"] == split)
    with open(os.path.join(out, "manifest.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=MANIFEST_FIELDS)
        w.writeheader()
        w.writerows(rows)


def summarize(args, out, rows, errors, fails, bad, only_voices, t0):
    """README.txt, and the same table and problems on stdout; the exit status."""
    table = {lab: {"training": 0, "validation": 0, "testing": 0} for lab in LABELS}
    for r in rows:
        table[r["label"]][r["split"]] += 1
    lines = [f"{'label':<10} {'training':>8} {'validation':>10} {'testing':>7} {'total':>6}"]
    for lab in LABELS + ["total"]:
        c = table[lab] if lab != "total" else {s: sum(table[x][s] for x in LABELS) for s in table[LABELS[0]]}
        lines.append(f"{lab:<10} {c['training']:>8} {c['validation']:>10} {c['testing']:>7} {sum(c.values()):>6}")
    eng = {}
    for r in rows:
        eng[r["engine"]] = eng.get(r["engine"], 0) + 1
    ev, fv, sv = tool_versions()
    cmd = " ".join(shlex.quote(a) for a in ["python3", "-m", "mega_kws_tools.data.make_sc10"] + sys.argv[1:])
    skipped = [f"{b[0]} {b[1]}{'+' + b[2] if b[2] else ''}" for b in bad]
    noisy_fail = {s: v for s, v in fails.items()}
    readme = [
        "Synthetic Speech Commands-style keyword dataset (SC10 + _unknown_ + _silence_).",
        "",
        f"Generated by: {cmd}",
        f"Tools: {ev}; {fv}; {sv}; numpy {np.__version__}",
        "Layout: <label>/<name>.wav (1.000 s, 16 kHz, mono, 16-bit PCM), validation_list.txt, testing_list.txt",
        "(the rest is training), manifest.csv (how each clip was made). See the docstring of",
        "tools/mega_kws_tools/data/make_sc10.py for the generation recipe and the split rule.",
        "",
        *[f"{sp} voices{' (clips)' if only_voices and sp == args.only_split else ''}: "
          + " ".join(v.id for v in G["voices"][sp]) for sp in vc.SPLITS],
        f"Near-miss _unknown_ clips (--near-miss, names <spk8>_n<index>_nohash_0.wav): "
        f"{sum(1 for r in rows if is_near_miss(r['path']))}",
        f"Accented keyword clips (--accent, names <spk8>_a<index>_nohash_0.wav): "
        f"{sum(1 for r in rows if is_accent(r['path']))}",
        f"espeak-ng variants: {len(G['variants'])}. Clips per engine: " + ", ".join(f"{k} {v}" for k, v in sorted(eng.items())),
        "Skipped (did not render): " + (", ".join(skipped) if skipped else "none"),
        "",
        *lines,
        "",
        f"Clips that could not be made: {len(errors)}",
        f"Renderings re-drawn (empty / too long / tempo failed): {sum(sum(v.values()) for v in noisy_fail.values())}",
    ]
    with open(os.path.join(out, "README.txt"), "w") as f:
        f.write("\n".join(readme) + "\n")
    print("\n".join(lines))
    for e in errors[:20]:
        print("error:", e)
    worst = sorted(fails.items(), key=lambda kv: -sum(kv[1].values()))[:10]
    if worst:
        print("most re-drawn renderings:", "; ".join(f"{s} {d}" for s, d in worst))
    print(f"wrote {len(rows)} clips to {out} in {time.time() - t0:.0f} s")
    return 0 if not errors else 1


def main():
    args = parse_args()
    only_voices, keep = check_args(args)
    t0 = time.time()
    out = os.path.abspath(args.out)
    for lab in LABELS:
        os.makedirs(os.path.join(out, lab), exist_ok=True)
    G["out"] = out
    G["festival"] = args.festival
    G["tmp_root"] = tempfile.mkdtemp(prefix="make_sc10_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ctx = mp.get_context("fork")
    try:
        bad = probe_voices(ctx, args)
        make_bank(ctx, args, only_voices, t0)
        tasks, run_key = clip_tasks(args, keep, only_voices)
        rows, errors, fails = make_clips(ctx, args, tasks, run_key, out)
    finally:
        FESTIVAL.close()
        shutil.rmtree(G["tmp_root"], ignore_errors=True)
    write_lists(out, rows)
    return summarize(args, out, rows, errors, fails, bad, only_voices, t0)


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
"""Train and measure candidate (b) of issue 83 item 4 (teacher.student: Mega
layers on the teacher's embedding), the way the bundled model is measured.

  train   on cached clips of training speakers and voices (stream_embed clips:
          the runtime's step floor), the checkpoint kept on real validation
          speakers' caches only (head.train's key)
  judge   the clip figures of one or more caches (head eval's JSON, so
          teacher.compare and the table read it beside the bundled model's)
  stream  the streaming figure: per-hop posteriors over whole recordings'
          embeddings (stream_embed recordings), detection defaults tuned per
          keyword at <= --max-fa-per-hour false alarms per keyword-free hour
          over the recordings pooled, as tools/scripts/measure_run.sh tunes the
          bundled model (tune_detection.pick_per_keyword, the runtime's
          detector), then each recording's figures at those defaults
  bundled a MegaKWS checkpoint (the bundled model's run) at its detection.json,
          each recording and pooled, with the same detector and counting
  table   judges side by side, one column per model (teacher.compare's counting)

A hop's posteriors come out once the front end has its last step:
(EMIT_SAMPLES - 1280) / 16000 = 0.742 s after the end of the hop's audio
counted in whole hops from the start, so the labels are moved that much
earlier before scoring (a detection is timed at the end of its hop).

Usage (from the repository root, PYTHONPATH=tools):
  python3 -m mega_kws_tools.teacher.student_run train --train CACHE [...] --val CACHE [...] --out RUN
         [--steps 3000] [--dim 64] [--layers 2] [--truncation 6] [--chunk 3] [--window 4]
         [--negative-stream EMB.npy [--mine-with RUN0/best.pt]] [--window-stream EMB.npy LABELS.csv]
         [--keep LABEL=SHARE ... [--keep-seed S]] [--train-whole CACHE ...] ...
  python3 -m mega_kws_tools.teacher.student_run judge --checkpoint RUN/best.pt --cache CACHE [...] --json-out F
  python3 -m mega_kws_tools.teacher.student_run stream --checkpoint RUN/best.pt
         --stream EMB.npy LABELS.csv [--stream ...] --out RUN/stream.json [--max-fa-per-hour 2]
  python3 -m mega_kws_tools.teacher.student_run bundled --checkpoint RUN/best.pt --detection RUN/detection.json
         --stream REC.wav LABELS.csv [--stream ...] --out F
  python3 -m mega_kws_tools.teacher.student_run table --columns A B [...] --judge NAME A.json B.json [--judge ...]
"""

import argparse
import csv
import json
import os
import time

import numpy as np
import torch

from mega_kws_tools import model as mt
from mega_kws_tools.audio import read_wav
from mega_kws_tools.evaluation import streamscore, tune_detection
from mega_kws_tools.evaluation.evaluate import rejection_tradeoff
from mega_kws_tools.teacher import compare, head, student
from mega_kws_tools.teacher.stream_embed import EMIT_SAMPLES, SAMPLES_PER_STEP

SR = 16000
LATENCY_S = (EMIT_SAMPLES - SAMPLES_PER_STEP) / SR  # 0.742 s


def judge(model, caches):
    """head eval's figures (and the trade-off at equal rejection) of the student on cached clips."""
    x, y = head.load_sets(caches)
    logits = student.clip_logits(model, x)
    result = head.scores(logits.argmax(axis=1), y)
    result["keywords_at_rejection"] = rejection_tradeoff(logits.tolist(), y.tolist(), list(head.LABELS))
    return result


def parse_keep(items):
    """{label index: share} of --keep LABEL=SHARE items."""
    out = {}
    for item in items:
        label, _, share = item.partition("=")
        if label not in head.LABELS:
            raise ValueError(f"--keep {item}: {label!r} is not one of {', '.join(head.LABELS)}")
        try:
            f = float(share)
        except ValueError:
            f = -1.0
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"--keep {item}: the share must be a number from 0 to 1")
        out[head.LABELS.index(label)] = f
    return out


def thin(x, y, keep, seed=0):
    """(x, y) with only the first round(share * n) clips, in a seeded order, of each label in `keep`
    ({label index: share}); the orders do not depend on the shares, so a smaller share keeps a
    subset of a larger one's clips."""
    mask = np.ones(len(y), dtype=bool)
    for label, share in sorted(keep.items()):
        idx = np.flatnonzero(y == label)
        order = np.random.default_rng([seed, label]).permutation(len(idx))
        mask[idx[order[int(round(share * len(idx))):]]] = False
    return x[mask], y[mask]


def label_rows(csv_path):
    """[(kind, onset_s, offset_s, label)] of a recording's labels (make_stream's CSV)."""
    with open(csv_path) as f:
        return [(r["kind"], float(r["onset_s"]), float(r["offset_s"]), r["label"]) for r in csv.DictReader(f)]


def student_recordings(model, streams):
    """[(name, posteriors, keywords, keyword-free stretches)] of recordings [(embeddings .npy, labels
    .csv)], the labels moved LATENCY_S earlier."""
    out = []
    for npy, csv_path in streams:
        kws, fr = streamscore.read_stream_labels(csv_path)
        out.append((os.path.basename(npy), student.stream_posteriors(model, np.load(npy)),
                    [(a - LATENCY_S, b - LATENCY_S, l) for a, b, l in kws], [(a - LATENCY_S, b - LATENCY_S) for a, b in fr]))
    return out


def bundled_recordings(model, streams):
    """The same for a MegaKWS checkpoint over recordings [(wav, labels .csv)] (tune_detection's posteriors)."""
    out = []
    for wav, csv_path in streams:
        p = tune_detection.stream_posteriors(model, read_wav(wav).astype(np.float32) / 32768.0)
        out.append((os.path.basename(wav), p, *streamscore.read_stream_labels(csv_path)))
    return out


def pooled(recordings, hop_s, warmup):
    """(probs, keywords, free, starts) of recordings [(name, probs, keywords, free)] back to back."""
    probs, keywords, free, starts, n = [], [], [], [], 0
    for _, p, kws, fr in recordings:
        keywords += [(a + n * hop_s, b + n * hop_s, l) for a, b, l in kws]
        free += [(a + n * hop_s, b + n * hop_s) for a, b in fr]
        starts.append((n, warmup))
        probs.append(p)
        n += len(p)
    return np.concatenate(probs), keywords, free, starts


def at_defaults(recordings, hop_s, warmup, defaults):
    """Each recording's figures, and the pooled ones, at detection defaults (detection.json's keys)."""
    refr = tune_detection.refractory_in_hops(defaults["refractory_ms"], hop_s)
    th, sm = np.array(defaults["thresholds"]), defaults["smoothing_hops"]
    probs, keywords, free, starts = pooled(recordings, hop_s, warmup)
    out = {"pooled": summary(tune_detection.run_detector(probs, starts, head.LABELS, th, sm, refr, hop_s, keywords,
                                                         free), keywords), "recordings": {}}
    for name, p, kws, fr in recordings:
        one = tune_detection.run_detector(p, [(0, warmup)], head.LABELS, th, sm, refr, hop_s, kws, fr)
        out["recordings"][name] = summary(one, kws)
    return out


def summary(r, keywords):
    return {"recall": r["recall"], "detected": r["detected"], "keywords": r["keywords"],
            "false_alarms_keyword_free": r["false_alarms_keyword_free"],
            "keyword_free_hours": r["keyword_free_hours"], "fa_per_hour_keyword_free": r["fa_per_hour_keyword_free"],
            "per_keyword": tune_detection.found_per_keyword(keywords, r["missed"])}


def stream_figures(model, streams, max_fa_per_hour=2.0, refractory_ms=1000):
    """Tunes per-keyword defaults over the pooled recordings and scores each recording at them."""
    cfg = model.cfg
    hop_s = cfg.chunk_size * SAMPLES_PER_STEP / SR
    t0 = time.time()
    recordings = student_recordings(model, streams)
    probs, keywords, free, starts = pooled(recordings, hop_s, cfg.window_chunks)
    t_post = time.time() - t0
    key, smoothing, thresholds, _ = tune_detection.pick_per_keyword(
        probs, starts, head.LABELS, hop_s, keywords, free, max_fa_per_hour, refractory_ms)
    defaults = {"thresholds": thresholds, "smoothing_hops": smoothing, "refractory_ms": refractory_ms}
    out = dict(at_defaults(recordings, hop_s, cfg.window_chunks, defaults), defaults=defaults,
               limit_met=bool(key[0]), max_fa_per_hour=max_fa_per_hour, hop_s=hop_s, latency_s=LATENCY_S)
    out["seconds"] = {"posteriors": round(t_post, 1), "tuning": round(time.time() - t0 - t_post, 1)}
    return out


def bundled_figures(checkpoint, detection, streams):
    """A MegaKWS checkpoint's figures at its detection.json over recordings [(wav, csv)], each and pooled."""
    model, _, _ = mt.load_checkpoint(checkpoint)
    with open(detection) as f:
        defaults = json.load(f)
    hop_s = model.cfg.chunk_samples / model.cfg.sample_rate
    return dict(at_defaults(bundled_recordings(model, streams), hop_s, model.cfg.window_chunks, defaults),
                defaults=defaults)


def table_rows(name, results):
    """Markdown rows of one judge, a column per result (head eval's or evaluate.py's JSON, read by
    teacher.compare from their confusion matrices): keywords right, each keyword, rejected."""
    figs = [compare.figures(compare.load(r) if isinstance(r, str) else r) for r in results]
    out = []
    if figs[0]["keywords"][1]:
        out.append(f"| **{name}: keywords right** | " + " | ".join(compare.cell(f["keywords"]) for f in figs) + " |")
        out += [f"| {name}: {k} | " + " | ".join(compare.cell(f.get(k, (0, 0))) for f in figs) + " |"
                for k in figs[0] if k not in ("keywords", "rejected")]
    if figs[0]["rejected"][1]:
        out.append(f"| **{name}: non-keywords rejected** | " + " | ".join(compare.cell(f["rejected"]) for f in figs) + " |")
    for level in compare.AT_REJECTION:
        at = [(compare.load(r) if isinstance(r, str) else r).get("keywords_at_rejection", {}).get(level) for r in results]
        if all(at):
            out.append(f"| {name}: keywords right where >= {float(level):.0%} of non-keywords are rejected | "
                       + " | ".join(f"{x['keyword_accuracy']:.1%}" for x in at) + " |")
    return out


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    t = head.train_parser(sub, "train a student on cached clips")
    head.add_options(t, (("steps", int, 3000), ("batch", int, 128), ("lr", float, 2e-3), ("seed", int, 83),
                         ("eval-every", int, 100), ("threads", int, 1), ("unknown-share", float, 0.0),
                         ("max-shift", int, 2), ("context-share", float, 0.5), ("dim", int, 64), ("layers", int, 2),
                         ("truncation", int, 6), ("chunk", int, 3), ("window", int, 4),
                         ("negative-share", float, 0.15), ("mine-threshold", float, 0.3),
                         ("window-share", float, 0.25)))
    t.add_argument("--window-stream", nargs=2, action="append", default=[], metavar=("EMB_NPY", "LABELS_CSV"),
                   help="a recording of training speakers with its labels: --window-share of each batch its "
                        "windows, labelled by the words that end in them (student.labelled_windows)")
    t.add_argument("--negative-stream", help="a keyword-free stream of training speakers (stream_embed .npy): "
                   "--negative-share of each batch its windows, as _unknown_")
    t.add_argument("--mine-with", help="a student's best.pt: half the stream's windows end where it gave a keyword "
                   ">= --mine-threshold")
    t.add_argument("--keep", action="append", default=[], metavar="LABEL=SHARE",
                   help="train on only this share (0 to 1) of the label's clips in the --train caches (repeat)")
    t.add_argument("--keep-seed", type=int, default=0, help="the order --keep draws in (default 0)")
    t.add_argument("--train-whole", action="append", default=[], metavar="CACHE",
                   help="a cache trained on whole, never thinned by --keep (repeat)")
    j = sub.add_parser("judge", help="a kept student's clip figures")
    j.add_argument("--checkpoint", required=True)
    j.add_argument("--cache", action="append", required=True, help="a cache; several are pooled")
    j.add_argument("--json-out", required=True)
    s = sub.add_parser("stream", help="detection tuned and measured on whole recordings")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--stream", nargs=2, action="append", required=True, metavar=("EMB_NPY", "LABELS_CSV"))
    s.add_argument("--max-fa-per-hour", type=float, default=2.0)
    s.add_argument("--out", required=True)
    bu = sub.add_parser("bundled", help="a MegaKWS checkpoint's figures at its detection defaults, per recording")
    bu.add_argument("--checkpoint", required=True)
    bu.add_argument("--detection", required=True, help="its detection.json")
    bu.add_argument("--stream", nargs=2, action="append", required=True, metavar=("WAV", "LABELS_CSV"))
    bu.add_argument("--out", required=True)
    c = sub.add_parser("table", help="judges side by side (Markdown)")
    c.add_argument("--columns", nargs="+", required=True, help="the columns' titles")
    c.add_argument("--judge", nargs="+", action="append", required=True, metavar="NAME FILE",
                   help="a judge's name, then one JSON per column (repeat)")
    return ap


def run_train(args, keep):
    d = args.dim
    cfg = student.student_config(embed_dim=d, hidden_dim=2 * d, ffn_hidden_dim=2 * d, z_dim=d // 2,
                                 classifier_dim=2 * d, n_layers=args.layers, truncation=args.truncation,
                                 chunk_size=args.chunk, window_chunks=args.window)
    x, y = head.load_sets(args.train)
    if keep:
        x, y = thin(x, y, keep, args.keep_seed)
        counts = ", ".join(f"{head.LABELS[l]} {int((y == l).sum())}" for l in sorted(keep))
        print(f"kept of --train: {counts}", flush=True)
    if args.train_whole:
        wx, wy = head.load_sets(args.train_whole)
        x, y = np.concatenate([x, wx]), np.concatenate([y, wy])
    vx, vy = head.load_sets(args.val)
    print(f"training on {len(y)} clips, validating on {len(vy)}; window {student.receptive_steps(cfg)} steps",
          flush=True)
    neg = np.load(args.negative_stream) if args.negative_stream else None
    hard = student.mine(student.load_student(args.mine_with)[0], neg, args.mine_threshold) \
        if args.mine_with and neg is not None else None
    if hard is not None:
        print(f"mined {len(hard)} of {len(neg) // args.chunk} hops of {args.negative_stream}", flush=True)
    student.train(x, y, vx, vy, args.out, cfg, args.steps, args.batch, args.lr, seed=args.seed,
                  eval_every=args.eval_every, max_shift=args.max_shift, context_share=args.context_share,
                  unknown_share=args.unknown_share, negative_stream=neg, hard_ends=hard,
                  negative_share=args.negative_share, window_share=args.window_share,
                  window_streams=[(np.load(e), label_rows(c)) for e, c in args.window_stream])


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command == "table":
        print("| judge | " + " | ".join(args.columns) + " |\n|---|" + "---|" * len(args.columns))
        for name, *files in args.judge:
            if len(files) != len(args.columns):
                ap.error(f"judge {name}: {len(files)} files for {len(args.columns)} columns")
            print("\n".join(table_rows(name, files)))
        return
    torch.set_num_threads(getattr(args, "threads", 1))
    if args.command == "train":
        try:
            keep = parse_keep(args.keep)
        except ValueError as e:
            ap.error(str(e))
        run_train(args, keep)
        return
    if args.command == "bundled":
        result = bundled_figures(args.checkpoint, args.detection, args.stream)
    else:
        model, _ = student.load_student(args.checkpoint)
        result = judge(model, args.cache) if args.command == "judge" else \
            stream_figures(model, args.stream, args.max_fa_per_hour)
    with open(args.json_out if args.command == "judge" else args.out, "w") as f:
        json.dump(result, f, indent=1)
    keys = ("clips", "keyword_accuracy", "per_label", "rejected") if args.command == "judge" else \
        ("defaults", "pooled", "recordings")
    print(json.dumps({k: result[k] for k in keys}))


if __name__ == "__main__":
    main()

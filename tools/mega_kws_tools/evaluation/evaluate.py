#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Measure a .mega model with the shipped runtime (keyword_spotter).

  evaluate.py --ks build/keyword_spotter --model MODEL.mega --data DIR [--split testing]
              [--stream stream.wav --stream-labels stream.csv [--sweep]] [--json-out results.json]
  evaluate.py --checkpoint RUN/best.pt --data DIR [--split validation] [--json-out results.json]

Clip accuracy: `keyword_spotter classify --json` on every clip of the split
(1 s clips, classified as one window), with a confusion matrix, and the
keyword accuracy the model would have where 70/80/90/95% of the non-keyword clips
are rejected (a bias on the _unknown_ logit, for comparing models at equal
rejection; it changes no model).
Streaming: `keyword_spotter scan --json` over a continuous recording, scored
against its labels: recall of keyword occurrences, false alarms overall and
per hour of keyword-free audio. --sweep adds the trade-off over thresholds
and smoothing (scan --threshold T --smoothing H), one table row per threshold.
--checkpoint measures clips in PyTorch instead, for a model the runtime
cannot load (train.py --patch-norm); the same figures, within float rounding.
"""
import argparse
import csv
import json
import os
import subprocess
import sys


from mega_kws_tools.data.layout import NOISE, clip_splits, folder_label, listed_missing
from mega_kws_tools.data.make_sc10 import CONFUSABLE, SC_OTHER
from mega_kws_tools.evaluation import streamscore


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd[:3])}... failed ({out.returncode}): {out.stderr}")
    return [json.loads(l) for l in out.stdout.splitlines() if l.strip()]


def classify_clips(ks, model, paths):
    """keyword_spotter classify --json on every path, 200 at a time: one row per clip."""
    rows = []
    for i in range(0, len(paths), 200):
        rows += run_json([ks, "classify", "-m", model, "--json"] + paths[i:i + 200])
    return rows


def clip_accuracy(ks, model, data, split):
    splits = clip_splits(data)
    files = [rel for rel, s in splits.items() if s == split and not rel.startswith(NOISE + "/")]
    # a listed clip that is not on disk is an error, not a clip the split lacks
    missing = [rel for rel, s in listed_missing(data, splits).items() if s == split]
    if missing:
        print(f"evaluate.py: {len(missing)} clip(s) of {data}'s {split} list missing, e.g. {missing[0]}; "
              "counted as errors", file=sys.stderr)
    paths = [os.path.join(data, f) for f in files]
    if ks is None:  # model is a checkpoint: classified in PyTorch
        rows, labels = torch_rows(model, paths)
    else:
        rows = classify_clips(ks, model, paths)
        info = subprocess.run([ks, "info", "-m", model], capture_output=True, text=True).stdout
        labels = [l for l in info.split("labels", 1)[1].split("\n", 1)[0].strip().split(",")]
    idx = {l: i for i, l in enumerate(labels)}
    ok = [r for r in rows if "error" not in r]
    errors = len(missing) + len(rows) - len(ok)
    truth = []  # each classified clip's true label, as an index into labels
    for r in ok:
        t = folder_label(os.path.basename(os.path.dirname(r["file"])), idx)
        if t is None:
            sys.exit(f"evaluate.py: {r['file']}: its folder is not one of the model's labels {labels}")
        truth.append(idx[t])
    conf = [[0] * len(labels) for _ in labels]
    for r, t in zip(ok, truth):
        conf[t][idx[r["label"]]] += 1
    per = {l: conf[i][i] / max(1, sum(conf[i])) for i, l in enumerate(labels)}
    total = sum(map(sum, conf))
    kw = [i for i, l in enumerate(labels) if not l.startswith("_")]
    other = [i for i, l in enumerate(labels) if l.startswith("_")]
    kw_clips = sum(sum(conf[i]) for i in kw)
    unk = labels.index("_unknown_") if "_unknown_" in labels else None
    result = {"split": split, "clips": total, "errors": errors,
              "accuracy": sum(conf[i][i] for i in range(len(labels))) / max(1, total),
              "per_label": per, "labels": labels, "confusion": conf,
              # the targets' terms: keywords right; keywords called _unknown_; non-keywords
              # (_unknown_, _silence_) classified as any non-keyword label
              "keyword_accuracy": sum(conf[i][i] for i in kw) / max(1, kw_clips),
              "keyword_to_unknown": (sum(conf[i][unk] for i in kw) / max(1, kw_clips)) if unk is not None else None,
              "rejected": {labels[i]: sum(conf[i][j] for j in other) / max(1, sum(conf[i])) for i in other}}
    result["keywords_at_rejection"] = rejection_tradeoff([r["logits"] for r in ok], truth, labels)
    man = manifest(data)
    result["per_voice"] = per_voice(rows, data, man)
    result["halfwords"] = halfwords(rows, data)
    result["unknown_words"] = unknown_words(rows, data, man)
    result["unknown_kinds"] = unknown_kinds(result["unknown_words"])
    result["per_noise"] = per_noise(rows, data, man)
    return result


TRADEOFF_REJECTION = (0.70, 0.80, 0.90, 0.95)  # non-keyword rejection levels the trade-off is read at
TRADEOFF_BIAS = [round(-8 + 0.05 * i, 2) for i in range(321)]  # added to the _unknown_ logit: -8 to +8


def rejection_tradeoff(logits, truth, labels):
    """What the model could do at other operating points, for comparing models that
    sit at different ones: with a bias b added to the _unknown_ logit (analysis only;
    no model or runtime setting), the share of keyword clips classified right against
    the share of _unknown_ and _silence_ clips rejected (any non-keyword label). For each
    level in TRADEOFF_REJECTION, the best keyword accuracy over the biases that reject at
    least that share, and that bias (None where no bias reaches it). logits: one row
    per classified clip; truth: its true label's index into labels. A model without
    _unknown_ gets an empty result."""
    import numpy as np
    if "_unknown_" not in labels:
        return {}
    unk = labels.index("_unknown_")
    z = np.array(logits, dtype=np.float64).reshape(len(truth), len(labels))
    truth = np.asarray(truth, dtype=np.int64)
    keyword = np.array([not labels[t].startswith("_") for t in truth], dtype=bool)
    non_keyword = [i for i, l in enumerate(labels) if l.startswith("_")]
    if not keyword.any() or keyword.all():
        return {}
    out = {}
    for b in TRADEOFF_BIAS:
        zb = z.copy()
        zb[:, unk] += b
        pred = zb.argmax(axis=1)
        acc = float(np.mean(pred[keyword] == truth[keyword]))
        rej = float(np.mean(np.isin(pred[~keyword], non_keyword)))
        for level in TRADEOFF_REJECTION:
            key = f"{level:.2f}"
            if rej >= level and (key not in out or acc > out[key]["keyword_accuracy"]):
                out[key] = {"keyword_accuracy": acc, "rejected": rej, "unknown_bias": b}
    return {f"{level:.2f}": out.get(f"{level:.2f}") for level in TRADEOFF_REJECTION}


def torch_rows(checkpoint, paths, batch=64):
    """classify's rows for a training checkpoint (or a .mega file, unpacked), run
    in PyTorch: each clip fitted to one second and classified as one window from
    a fresh state, as classify does. For models the runtime cannot load yet."""
    import numpy as np
    import torch
    from mega_kws_tools import model as mega_torch
    from mega_kws_tools.audio import SR, read_wav
    from mega_kws_tools.convert.loading import load_init
    from mega_kws_tools.data.dataset import fit_second
    ck = load_init(checkpoint)
    if ck is None:
        sys.exit(1)
    model = mega_torch.model_from_config_checkpoint(ck).eval()
    window = model.cfg.window_samples
    if window != SR:
        sys.exit(f"evaluate.py: {checkpoint}: a window of {window} samples, not one second")
    rows = []
    with torch.no_grad():
        for i in range(0, len(paths), batch):
            part = paths[i:i + batch]
            x = np.stack([fit_second(read_wav(p)) for p in part]).astype(np.float32) / 32768.0
            logits = model(torch.from_numpy(x))
            rows += [{"file": p, "label": ck["labels"][int(k)], "logits": z.tolist()}
                     for p, k, z in zip(part, logits.argmax(dim=1), logits)]
    return rows, list(ck["labels"])


def halfwords(rows, data):
    """For a folder of half-keyword clips (tools/mega_kws_tools/augment/make_splices.py, its
    splices.csv): per keyword and part kept, the share of clips called that
    keyword and the share called any keyword."""
    path = os.path.join(data, "splices.csv")
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        src = {r["clip"]: (r["keyword"], r["kept"]) for r in csv.DictReader(f)}
    out = {}
    for r in rows:
        key = src.get(os.path.relpath(r["file"], data))
        if key is None or "error" in r:
            continue
        n, same, kw = out.get(key, (0, 0, 0))
        out[key] = (n + 1, same + (r["label"] == key[0]), kw + (not r["label"].startswith("_")))
    return {f"{k} {part}": {"clips": n, "called_the_keyword": s / n, "called_a_keyword": a / n}
            for (k, part), (n, s, a) in sorted(out.items())}


def manifest(data):
    """The dataset's manifest.csv (make_sc10.py) as {path: row}; {} without one."""
    path = os.path.join(data, "manifest.csv")
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {r["path"]: r for r in csv.DictReader(f)}


def described(rows, data, man):
    """The classify rows that ran and that the manifest (`man`, from manifest())
    lists, each with its manifest row: (row, manifest row)."""
    for r in rows:
        m = man.get(os.path.relpath(r["file"], data)) if "error" not in r else None
        if m is not None:
            yield r, m


def unknown_words(rows, data, man):
    """For the _unknown_ clips of a dataset with a manifest (`man`, from manifest()):
    per word said, the clips, the share called a keyword and the keyword it is
    called most."""
    out = {}
    for r, m in described(rows, data, man):
        w = m.get("word", "") if m["label"] == "_unknown_" else ""
        if not w:
            continue
        n, called = out.get(w, (0, {}))
        if not r["label"].startswith("_"):
            called[r["label"]] = called.get(r["label"], 0) + 1
        out[w] = (n + 1, called)
    return {w: {"clips": n, "called_a_keyword": sum(c.values()) / n,
                "most_called": max(sorted(c), key=c.get) if c else ""} for w, (n, c) in sorted(out.items())}


def per_voice(rows, data, man):
    """Keyword accuracy per voice (engine:voice) from the dataset's manifest (`man`,
    from manifest()), if any."""
    out = {}
    for r, m in described(rows, data, man):
        if m["label"].startswith("_"):
            continue
        voice = f"{m['engine']}:{m['voice']}"
        n, k = out.get(voice, (0, 0))
        out[voice] = (n + 1, k + (r["label"] == m["label"]))
    return {v: {"clips": n, "keyword_accuracy": k / n} for v, (n, k) in sorted(out.items())}


def unknown_kinds(words):
    """unknown_words() pooled by the kind of word: the other Speech Commands words,
    the keywords' near misses (make_sc10.CONFUSABLE) and the rest (common words):
    per kind, the clips and the share rejected (not called a keyword)."""
    out = {}
    for w, r in words.items():
        kind = "speech_commands" if w in SC_OTHER else "near_miss" if w in CONFUSABLE else "other"
        n, called = out.get(kind, (0, 0.0))
        out[kind] = (n + r["clips"], called + r["clips"] * r["called_a_keyword"])
    return {k: {"clips": n, "rejected": 1 - c / n} for k, (n, c) in sorted(out.items())}


def per_noise(rows, data, man):
    """Keyword accuracy and the share called _unknown_ per noise kind and SNR
    of the clip as generated (manifest columns noise, snr_db; "clean" without
    noise); {} without a manifest."""
    out = {}
    for r, m in described(rows, data, man):
        if m["label"].startswith("_"):
            continue
        key = (m["noise"], float(m["snr_db"])) if m.get("noise") else ("", 0.0)
        n, right, unknown = out.get(key, (0, 0, 0))
        out[key] = (n + 1, right + (r["label"] == m["label"]), unknown + (r["label"] == "_unknown_"))
    return {f"{k[0]} {k[1]:g} dB" if k[0] else "clean": {"clips": n, "keyword_accuracy": a / n, "called_unknown": u / n}
            for k, (n, a, u) in sorted(out.items())}


SWEEP_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.94, 0.96, 0.98)
SWEEP_SMOOTHING = (2, 3, 5)


def stream_eval(ks, model, wav, csv_path, extra=()):
    # the detections; scan also writes a summary (or an error) object per file
    dets = [d for d in run_json([ks, "scan", "-m", model, "--json", *extra, wav]) if d.get("type") == "detection"]
    keywords, free = streamscore.read_stream_labels(csv_path)
    r = streamscore.score([(d["time_s"], d["label"]) for d in dets], keywords, free)
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", help="path to keyword_spotter")
    ap.add_argument("--model", help="the .mega model keyword_spotter runs")
    ap.add_argument("--checkpoint", help="instead of --ks and --model: a training checkpoint (or .mega file), "
                                         "clips classified in PyTorch (--data only)")
    ap.add_argument("--data")
    ap.add_argument("--split", default="testing", choices=["training", "validation", "testing"])
    ap.add_argument("--stream")
    ap.add_argument("--stream-labels")
    ap.add_argument("--sweep", action="store_true", help="with --stream: the recall / false-alarm trade-off")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    if args.checkpoint and (args.ks or args.model or args.stream):
        ap.error("--checkpoint replaces --ks and --model, and measures clips only (--data)")
    if not args.checkpoint and not (args.ks and args.model):
        ap.error("give --ks and --model, or --checkpoint")
    result = {}
    if args.data:
        c = clip_accuracy(None if args.checkpoint else args.ks, args.checkpoint or args.model, args.data, args.split)
        result["clips"] = c
        print(f"{args.split}: {c['clips']} clips, accuracy {c['accuracy']:.4f}"
              + (f"; {c['errors']} clip(s) not classified (missing or unreadable)" if c["errors"] else ""))
        print("  " + ", ".join(f"{l} {a:.3f}" for l, a in c["per_label"].items()))
        print(f"  keywords: {c['keyword_accuracy']:.4f} right, {c['keyword_to_unknown'] or 0:.4f} called _unknown_; "
              "rejected: " + ", ".join(f"{l} {a:.3f}" for l, a in c["rejected"].items()))
        if c["keywords_at_rejection"]:
            print("  keywords right where _unknown_ and _silence_ are rejected >= " + ", ".join(
                f"{100 * float(k):.0f}%: " + ("-" if v is None else f"{100 * v['keyword_accuracy']:.1f}%")
                for k, v in c["keywords_at_rejection"].items()) + " (a bias on _unknown_; analysis only)")
        for v, r in c["per_voice"].items():
            print(f"  voice {v}: {r['keyword_accuracy']:.3f} of {r['clips']} keyword clips")
        for v, r in c["halfwords"].items():
            print(f"  half-keyword {v}: {r['called_the_keyword']:.3f} called the keyword, "
                  f"{r['called_a_keyword']:.3f} a keyword ({r['clips']} clips)")
        if c["unknown_kinds"]:
            print("  _unknown_ rejected by kind of word: " + ", ".join(
                f"{k} {r['rejected']:.3f} ({r['clips']})" for k, r in c["unknown_kinds"].items()))
        if c["per_noise"]:
            print("  keywords right by noise: " + ", ".join(
                f"{k} {r['keyword_accuracy']:.2f} ({r['clips']})" for k, r in c["per_noise"].items()))
        worst = sorted(c["unknown_words"].items(), key=lambda kv: -kv[1]["called_a_keyword"])[:12]
        if worst:
            print("  _unknown_ words most often called a keyword: " + ", ".join(
                f"{w} {r['called_a_keyword']:.2f} ({r['most_called'] or '-'}, {r['clips']})" for w, r in worst))
        w = max(len(l) for l in c["labels"])
        print(" " * (w + 2) + " ".join(f"{l[:5]:>5}" for l in c["labels"]))
        for l, row in zip(c["labels"], c["confusion"]):
            print(f"  {l:<{w}} " + " ".join(f"{v:5d}" for v in row))
    if args.stream:
        s = stream_eval(args.ks, args.model, args.stream, args.stream_labels)
        result["stream"] = {k: v for k, v in s.items()}
        print(f"stream: {s['detected']}/{s['keywords']} keywords detected (recall {s['recall']:.3f}), "
              f"{s['false_alarms']} false alarms, {s['false_alarms_keyword_free']} in "
              f"{s['keyword_free_hours'] * 60:.1f} min keyword-free ({s['fa_per_hour_keyword_free']:.1f}/h)")
        for m in s["missed"]:
            print(f"  missed {m[2]} at {m[0]:.2f} s")
        for t, l in s["false_alarm_list"]:
            print(f"  false alarm {l} at {t:.2f} s")
        if args.sweep:
            result["sweep"] = []
            print("| threshold | " + " | ".join(f"smoothing {h}: recall, false alarms (keyword-free)"
                                               for h in SWEEP_SMOOTHING) + " |")
            print("|---|" + "---|" * len(SWEEP_SMOOTHING))
            for thr in SWEEP_THRESHOLDS:
                cells = []
                for h in SWEEP_SMOOTHING:
                    r = stream_eval(args.ks, args.model, args.stream, args.stream_labels,
                                    ("--threshold", str(thr), "--smoothing", str(h)))
                    result["sweep"].append({"threshold": thr, "smoothing": h, "recall": r["recall"],
                                            "detected": r["detected"], "false_alarms": r["false_alarms"],
                                            "false_alarms_keyword_free": r["false_alarms_keyword_free"]})
                    cells.append(f"{100 * r['recall']:.1f}% ({r['detected']}/{r['keywords']}), "
                                 f"{r['false_alarms']} ({r['false_alarms_keyword_free']})")
                print(f"| {thr} | " + " | ".join(cells) + " |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

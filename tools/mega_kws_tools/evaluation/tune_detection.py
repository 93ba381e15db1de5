#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Tune detection defaults (threshold, smoothing, refractory) on a validation stream.

  tune_detection.py --checkpoint RUN/best.pt --stream val.wav --labels val.csv -o detection.json
                    [--stream val2.wav --labels val2.csv ...] [--max-fa-per-hour 1.0]
  tune_detection.py --checkpoint RUN/best.pt --stream val.wav --labels val.csv --holdout-check
  tune_detection.py --model MODEL.mega --stream val.wav --labels val.csv -o detection.json

Several recordings (--stream/--labels pairs, in order) are tuned as one: their
keywords and keyword-free stretches pooled, so the false-alarm limit holds
over all their keyword-free time together.

Streaming posteriors come from the PyTorch reference (features of a causal
model over the whole stream equal the streamed ones), or with --model from
the runtime streaming the file (runtime_posteriors); the detector is the
runtime's (streamscore.detect_streams: each recording its own stream, with
the model's window as its warm-up; a detection timed at the end of the hop
the word was heard in, as keyword_spotter scan times it). Picks, among
thresholds (0.50-0.995; steps of 0.005 from 0.90; the sweep drawn for the
model card's curve starts at 0.30) x smoothing (1-6 hops), the one with the best recall
whose false alarms on keyword-free stretches stay under the limit (ties:
fewer false alarms, then the higher threshold). If none stays under it, the
one with the fewest false alarms there (ties: the best recall), with a
warning: never the loudest setting.

--holdout-check asks whether the tuning carries over to audio it did not see:
the pooled recording is cut in two halves; on each, one shared threshold is
tuned as above, and a per-keyword set greedily (lower the one keyword's
threshold that gains the most recall, or the most recall per false alarm
added, while false alarms stay under the limit, until none does; the better
of the two); both are then scored on the other half. It prints the
table and writes nothing (-o is not needed).

--false-alarms lists, at the setting tuned for --max-fa-per-hour, every false
alarm with the labelled words (and their clips) heard in the 2.5 s before it,
and counts the distinct clips behind them: the recordings reuse clips, so a
few confident near misses can make up most of the false alarms.
"""
import argparse
import collections
import csv
import json
import os
import sys
import wave


import numpy as np
import torch

from mega_kws_tools import model as mt
from mega_kws_tools.audio import read_wav
from mega_kws_tools.evaluation import streamscore
from mega_kws_tools.evaluation.runtime_posteriors import RuntimeModel


def stream_posteriors(model, samples: np.ndarray) -> np.ndarray:
    if isinstance(model, RuntimeModel):
        return model.stream_posteriors(samples)
    cfg = model.cfg
    cs = cfg.chunk_samples
    n = len(samples) // cs * cs
    with torch.no_grad():
        feats = model.features(torch.from_numpy(samples[:n]).unsqueeze(0))[0]
        logits = model.chunk_window_logits(feats)
    return torch.softmax(logits.double(), dim=1).numpy()


def recording_starts(streams, chunk_samples, hop_s):
    """[(start_s, wav file name)] of recordings [(wav, csv)] played back to back,
    each lasting its complete chunks (a posterior per chunk)."""
    out, offset = [], 0.0
    for wav, _ in streams:
        out.append((offset, os.path.basename(wav)))
        with wave.open(wav) as w:
            offset += w.getnframes() // chunk_samples * hop_s
    return out


def pooled_posteriors(model, streams, hop_s):
    """Posteriors of several recordings back to back, with their labels'
    keywords and keyword-free stretches shifted to match: [(wav, csv)] ->
    (probs, keywords, free, starts); starts: [(first hop, warm-up hops)] of
    each recording (streamscore.detect_streams), the warm-up the model's window
    in chunks, as the runtime's detector takes it from the .mega file."""
    all_probs, keywords, free, starts = [], [], [], []
    for (wav, csv_path), (offset, _) in zip(streams, recording_starts(streams, model.cfg.chunk_samples, hop_s)):
        starts.append((sum(len(p) for p in all_probs), model.cfg.window_chunks))
        all_probs.append(stream_posteriors(model, read_wav(wav).astype(np.float32) / 32768.0))
        kws, fr = streamscore.read_stream_labels(csv_path)
        keywords += [(a + offset, b + offset, l) for a, b, l in kws]
        free += [(a + offset, b + offset) for a, b in fr]
    return np.concatenate(all_probs), keywords, free, starts


def run_detector(probs, starts, labels, thresholds, smoothing, refractory_hops, hop_s, keywords, free):
    """The runtime's detector over posteriors (recordings starting at `starts`,
    see pooled_posteriors), scored against their labels; each detection timed
    as the runtime reports it, at the end of the hop the word was heard in."""
    can_fire = np.array([not l.startswith("_") for l in labels])
    dets = streamscore.detect_streams(probs, starts, thresholds, smoothing, refractory_hops, can_fire)
    return streamscore.score([((e + 1) * hop_s, labels[l]) for _, l, _, e in dets], keywords, free)


def refractory_in_hops(refractory_ms, hop_s):
    return int(np.ceil(refractory_ms / 1000 / hop_s - 1e-9))


# Steps of 0.02, and of 0.005 from 0.90 up: near the top the posteriors crowd together, and
# with 0.02 steps the recall at <= 5 false alarms per hour jumped between two settings.
# The sweep's low end draws the trade-off; a chosen default is never below MIN_DEFAULT:
# by default a keyword fires only at even odds or better, so --sensitivity keeps its
# room (0.8 lowers every threshold by 0.3; a default of 0.3 became the runtime's floor
# of 0.01, where a keyword's posterior in near-silence, about 0.02, fires).
MIN_DEFAULT = 0.5
THRESHOLDS = np.round(np.concatenate([np.arange(0.30, 0.899, 0.02), np.arange(0.90, 0.9951, 0.005)]), 3)
SMOOTHINGS = range(1, 7)  # hops averaged: up to 1.5 s at a 250 ms hop, which delays a detection by up to 1.25 s


def sweep(probs, starts, labels, hop_s, keywords, free, refractory_ms=1000, verbose=False):
    """Every setting of the search (smoothing x threshold) with its score:
    [(smoothing, threshold, score)]. probs, starts: pooled_posteriors'."""
    refr = refractory_in_hops(refractory_ms, hop_s)
    rows = []
    for smoothing in SMOOTHINGS:
        for thr in THRESHOLDS:
            r = run_detector(probs, starts, labels, np.full(len(labels), thr), smoothing, refr, hop_s, keywords, free)
            if verbose:
                print(f"smoothing {smoothing} threshold {thr:g}: recall {r['recall']:.3f}, false alarms "
                      f"{r['false_alarms']} ({r['fa_per_hour_keyword_free']:.2f}/h keyword-free)")
            rows.append((smoothing, float(thr), r))
    return rows


def pick(rows, max_fa_per_hour):
    """The setting of a sweep (threshold >= MIN_DEFAULT) with the best recall
    whose false alarms per keyword-free hour stay under the limit; returns (key, smoothing, threshold,
    score), key[0] = whether the limit was met (see the module's docstring)."""
    best = None
    for smoothing, thr, r in rows:
        if thr < MIN_DEFAULT:
            continue
        if r["fa_per_hour_keyword_free"] <= max_fa_per_hour:
            key = (1, r["recall"], -r["false_alarms"], thr)
        else:
            key = (0, -r["fa_per_hour_keyword_free"], r["recall"], thr)
        if best is None or key > best[0]:
            best = (key, smoothing, thr, r)
    return best


def tune(probs, starts, labels, hop_s, keywords, free, max_fa_per_hour, refractory_ms=1000, verbose=False):
    """pick() over a sweep(): the tuned setting for one limit."""
    return pick(sweep(probs, starts, labels, hop_s, keywords, free, refractory_ms, verbose), max_fa_per_hour)


GREEDY = ("gain", "gain_per_false_alarm")  # tune_per_keyword's two ways to choose its next step


def tune_per_keyword(probs, starts, labels, hop_s, keywords, free, max_fa_per_hour, smoothing, refractory_ms=1000,
                     by="gain"):
    """Greedy per-keyword thresholds at one smoothing: from every keyword off,
    repeatedly lower one keyword's threshold (on THRESHOLDS, not below
    MIN_DEFAULT) while the false alarms stay under the limit, choosing the step
    that gains the most recall (by="gain"), or the most recall per keyword-free
    false alarm it adds (by="gain_per_false_alarm": the steps that cost no
    false alarm first, so that one step's false alarms do not use up a budget
    that two cheaper steps would have found more with). Returns (thresholds,
    score)."""
    if by not in GREEDY:
        raise ValueError(f"by: one of {', '.join(GREEDY)}, not {by!r}")
    refr = refractory_in_hops(refractory_ms, hop_s)
    th = np.full(len(labels), 1.01)  # above any posterior: nothing fires
    cur = run_detector(probs, starts, labels, th, smoothing, refr, hop_s, keywords, free)
    while True:
        best = None
        for k, label in enumerate(labels):
            if label.startswith("_"):
                continue
            for t in THRESHOLDS[(THRESHOLDS < th[k] - 1e-9) & (THRESHOLDS >= MIN_DEFAULT)]:
                trial = th.copy()
                trial[k] = t
                r = run_detector(probs, starts, labels, trial, smoothing, refr, hop_s, keywords, free)
                if r["fa_per_hour_keyword_free"] > max_fa_per_hour or r["recall"] <= cur["recall"]:
                    continue
                gain = r["recall"] - cur["recall"]
                if by == "gain_per_false_alarm":
                    cost = max(0, r["false_alarms_keyword_free"] - cur["false_alarms_keyword_free"])
                    gain /= 1 + cost
                key = (gain, -r["false_alarms"], t)
                if best is None or key > best[0]:
                    best = (key, k, t, r)
        if best is None:
            return th, cur
        _, k, t, cur = best
        th[k] = t


def trade_off(rows, chosen, setting):
    """What plot_card.py draws: over a sweep's settings, the best recall at each
    false-alarm rate reached (the upper-left frontier), and the chosen setting
    (its score and its detection.json contents)."""
    points = sorted((r["fa_per_hour_keyword_free"], r["recall"]) for _, _, r in rows)
    frontier, best = [], -1.0
    for fa, rec in points:
        if rec > best:
            frontier.append([round(fa, 4), round(rec, 4)])
            best = rec
    return {"frontier": frontier, "keyword_free_hours": round(chosen["keyword_free_hours"], 4),
            "keywords": chosen["keywords"],
            "chosen": {"fa_per_hour": round(chosen["fa_per_hour_keyword_free"], 4),
                       "recall": round(chosen["recall"], 4), "thresholds": setting["thresholds"],
                       "smoothing_hops": setting["smoothing_hops"]}}


def best_per_keyword(probs, starts, labels, hop_s, keywords, free, max_fa_per_hour, smoothing, refractory_ms=1000,
                     verbose=False):
    """tune_per_keyword both ways (GREEDY) at one smoothing: the (thresholds,
    score) with the better recall (ties: fewer false alarms, then the first way)."""
    best = None
    for i, by in enumerate(GREEDY):
        th, r = tune_per_keyword(probs, starts, labels, hop_s, keywords, free, max_fa_per_hour, smoothing,
                                 refractory_ms, by)
        if verbose:
            print(f"smoothing {smoothing}, steps by {by}: per-keyword recall {r['recall']:.3f}, "
                  f"{r['false_alarms']} false alarms ({r['fa_per_hour_keyword_free']:.2f}/h keyword-free)",
                  flush=True)
        key = (r["recall"], -r["false_alarms"], -i)
        if best is None or key > best[0]:
            best = (key, th, r)
    return best[1], best[2]


def pick_per_keyword(probs, starts, labels, hop_s, keywords, free, max_fa_per_hour, refractory_ms=1000):
    """best_per_keyword at every smoothing; the one with the best recall under
    the limit (ties: fewer false alarms, then less smoothing). Returns (key,
    smoothing, thresholds as a list for the model file, score); a keyword the
    greedy search left off gets the highest threshold searched, the labels
    that never fire ('_...') 1.0."""
    best = None
    for smoothing in SMOOTHINGS:
        th, r = best_per_keyword(probs, starts, labels, hop_s, keywords, free, max_fa_per_hour, smoothing,
                                 refractory_ms, verbose=True)
        ok = r["fa_per_hour_keyword_free"] <= max_fa_per_hour
        key = (int(ok), r["recall"], -r["false_alarms"], -smoothing)
        if best is None or key > best[0]:
            best = (key, smoothing, th, r)
    key, smoothing, th, r = best
    top = float(THRESHOLDS.max())
    thresholds = [1.0 if l.startswith("_") else round(float(min(t, top)), 4) for l, t in zip(labels, th)]
    return key, smoothing, thresholds, r


def split_recording(probs, keywords, free, starts, hop_s, at_hop):
    """A recording's posteriors and labels cut at one hop: two (probs,
    keywords, free, starts), each timed from its own start. A keyword goes with
    the half its onset is in; a keyword-free stretch is cut in two; a
    recording cut in two starts the second half without a warm-up (the
    model's window is already full there)."""
    t = at_hop * hop_s
    first = (probs[:at_hop], [k for k in keywords if k[0] < t], [(a, min(b, t)) for a, b in free if a < t],
             [(h, w) for h, w in starts if h < at_hop])
    later = [(h - at_hop, w) for h, w in starts if h >= at_hop]
    second = (probs[at_hop:], [(a - t, b - t, l) for a, b, l in keywords if a >= t],
              [(max(a, t) - t, b - t) for a, b in free if b > t],
              later if later and later[0][0] == 0 else [(0, 0)] + later)
    return first, second


def holdout_check(probs, starts, labels, hop_s, keywords, free, max_fa_per_hour, refractory_ms):
    """Tune on each half of the recording, score on the other (--holdout-check)."""
    refr = refractory_in_hops(refractory_ms, hop_s)
    halves = split_recording(probs, keywords, free, starts, hop_s, len(probs) // 2)
    names = ("first half", "second half")
    print(f"tuned at <= {max_fa_per_hour:g} false alarms per keyword-free hour on one half, scored on the other:")
    print("| tuned on | one threshold: setting; recall, false alarms per hour on the other half "
          "| per keyword: thresholds; recall, false alarms per hour on the other half |")
    print("|---|---|---|")
    for i in (0, 1):
        (p_a, k_a, f_a, s_a), (p_b, k_b, f_b, s_b) = halves[i], halves[1 - i]
        _, sm, thr, _ = tune(p_a, s_a, labels, hop_s, k_a, f_a, max_fa_per_hour, refractory_ms)
        one = run_detector(p_b, s_b, labels, np.full(len(labels), thr), sm, refr, hop_s, k_b, f_b)
        th, _ = best_per_keyword(p_a, s_a, labels, hop_s, k_a, f_a, max_fa_per_hour, sm, refractory_ms)
        per = run_detector(p_b, s_b, labels, th, sm, refr, hop_s, k_b, f_b)
        setting = " ".join(f"{l} {t:g}" if t <= 1 else f"{l} off" for l, t in zip(labels, th) if not l.startswith("_"))
        print(f"| {names[i]} | {thr:g}, smoothing {sm}; {100 * one['recall']:.1f}%, "
              f"{one['fa_per_hour_keyword_free']:.1f} | {setting}; {100 * per['recall']:.1f}%, "
              f"{per['fa_per_hour_keyword_free']:.1f} |")


CURVE_LIMITS = (5, 10, 20, 50, 100)  # --curve: false alarms per keyword-free hour


HEARD_BEFORE_S = 2.5  # a 1 s window, smoothed over up to 6 hops of 250 ms


def false_alarm_report(false_alarms, streams, hop_s, chunk_samples, free):
    """Lines naming each false alarm [(t, label)] of the pooled recordings
    [(wav, csv)]: where it is, whether in a keyword-free stretch, and the
    labelled words (word, clip) overlapping the HEARD_BEFORE_S before it; then
    the clips heard before more than one false alarm in keyword-free stretches."""
    rows, starts = [], recording_starts(streams, chunk_samples, hop_s)
    for (_, csv_path), (offset, _) in zip(streams, starts):
        with open(csv_path) as f:
            for r in csv.DictReader(f):
                if r["kind"] != "keyword_free":
                    rows.append((float(r["onset_s"]) + offset, float(r["offset_s"]) + offset, r["detail"],
                                 r["source"]))
    lines, behind, n_free = [], collections.Counter(), 0
    for t, label in false_alarms:
        near = [r for r in rows if r[0] < t and r[1] > t - HEARD_BEFORE_S]
        in_free = any(a <= t <= b for a, b in free)
        start, name = [s for s in starts if s[0] <= t][-1]
        heard = "; ".join(f"{r[2]} ({r[3]})" for r in near) or "no labelled word"
        lines.append(f"false alarm {label} at {t:.2f} s ({name} {t - start:.2f} s)"
                     f"{', keyword-free' if in_free else ''}: heard before it: {heard}")
        if in_free:
            n_free += 1
            behind.update({(r[2], r[3]) for r in near})
    lines.append(f"{len(false_alarms)} false alarms, {n_free} in keyword-free stretches")
    for (word, clip), n in behind.most_common():
        if n > 1:
            lines.append(f"  {n} of those after the same clip: {word} ({clip})")
    return lines


def found_per_keyword(keywords, missed) -> dict:
    """{keyword: [found, said]} in the recordings at a setting (the score's keywords and missed),
    in the order the keywords are first said."""
    said = collections.Counter(label for _, _, label in keywords)
    lost = collections.Counter(label for _, _, label in missed)
    return {k: [n - lost[k], n] for k, n in said.items()}


def detection_file(thresholds, smoothing: int, refractory_ms: int, tuned_on: dict) -> dict:
    """What -o writes: the detector's settings, which mega_convert --detection
    stores, and where they were tuned (tuned_on, with the finds per keyword: read by the ship rule, not stored)."""
    return {"thresholds": thresholds, "smoothing_hops": smoothing, "refractory_ms": refractory_ms,
            "tuned_on": tuned_on}


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a MegaKWS training checkpoint: posteriors from the PyTorch reference")
    source.add_argument("--model", help="a .mega file: posteriors from this build's runtime (MEGA_KWS_LIBRARY)")
    ap.add_argument("--stream", required=True, action="append", help="validation recording (repeatable)")
    ap.add_argument("--labels", required=True, action="append", help="its labels (one per --stream)")
    ap.add_argument("-o", "--output", help="detection.json to write (not with --holdout-check)")
    ap.add_argument("--max-fa-per-hour", type=float, default=1.0)
    ap.add_argument("--refractory-ms", type=int, default=1000)
    ap.add_argument("--curve-json", metavar="FILE",
                    help="with -o: write the trade-off (the best recall at each false-alarm rate over the sweep) "
                         "and the chosen setting, for tools/mega_kws_tools/evaluation/plot_card.py")
    ap.add_argument("--per-keyword", action="store_true",
                    help="with -o: a threshold per keyword (tune_per_keyword at each smoothing, the best "
                         "recall under the limit) instead of one shared threshold")
    ap.add_argument("--holdout-check", action="store_true",
                    help="tune on each half of the recording and score on the other; write nothing")
    ap.add_argument("--curve", action="store_true",
                    help="print the best recall (and its setting) at <= 5, 10, 20, 50 and 100 false alarms "
                         "per keyword-free hour (with -o, also write the setting tuned at "
                         "--max-fa-per-hour)")
    ap.add_argument("--false-alarms", action="store_true",
                    help="list the false alarms at the setting tuned for --max-fa-per-hour, each with the "
                         "words and clips heard before it (with -o, also write that setting)")
    return ap


def main() -> int:
    ap = build_parser()
    args = ap.parse_args()
    if not args.output and not args.holdout_check and not args.curve and not args.false_alarms:
        ap.error("give -o/--output (or --holdout-check, --curve or --false-alarms)")
    if len(args.stream) != len(args.labels):
        ap.error("give one --labels per --stream")
    torch.set_num_threads(2)
    if args.model:
        model = RuntimeModel(args.model)
        labels = model.labels
    else:
        model, _, extra = mt.load_checkpoint(args.checkpoint)
        labels = extra["labels"]
    cfg = model.cfg
    hop_s = cfg.chunk_samples / cfg.sample_rate
    probs, keywords, free, starts = pooled_posteriors(model, list(zip(args.stream, args.labels)), hop_s)
    if args.holdout_check:
        holdout_check(probs, starts, labels, hop_s, keywords, free, args.max_fa_per_hour, args.refractory_ms)
        return 0
    rows = sweep(probs, starts, labels, hop_s, keywords, free, args.refractory_ms,
                 verbose=not (args.curve or args.false_alarms))
    if args.curve:
        for limit in CURVE_LIMITS:
            key, smoothing, thr, r = pick(rows, limit)
            print(f"<= {limit:g} per keyword-free hour: recall {r['recall']:.1%} at threshold {thr:g}, "
                  f"smoothing {smoothing} ({r['fa_per_hour_keyword_free']:.1f} per hour)"
                  f"{'' if key[0] else ' (limit not met)'}", flush=True)
        if not args.output and not args.false_alarms:
            return 0
    key, smoothing, thr, r = pick(rows, args.max_fa_per_hour)
    thresholds = [round(thr, 4)] * len(labels)
    if args.per_keyword:
        key, smoothing, thresholds, r = pick_per_keyword(probs, starts, labels, hop_s, keywords, free,
                                                         args.max_fa_per_hour, args.refractory_ms)
        thr = min(t for t, l in zip(thresholds, labels) if not l.startswith("_"))
    if args.false_alarms:
        print(f"at threshold {thr:g}, smoothing {smoothing} (tuned for <= {args.max_fa_per_hour:g} per "
              f"keyword-free hour): recall {r['recall']:.1%}")
        for line in false_alarm_report(r["false_alarm_list"], list(zip(args.stream, args.labels)), hop_s,
                                       cfg.chunk_samples, free):
            print(line)
        if not args.output:
            return 0
    if not key[0]:
        print(f"tune_detection.py: warning: no setting keeps false alarms under {args.max_fa_per_hour}/h of "
              "keyword-free audio; chose the one with the fewest", file=sys.stderr)
    tuned_on = {"stream": " + ".join(os.path.basename(w) for w in args.stream),
                "max_fa_per_hour": args.max_fa_per_hour,
                "limit_met": bool(key[0]), "recall": r["recall"],
                "false_alarms": r["false_alarms"], "fa_per_hour_keyword_free": r["fa_per_hour_keyword_free"],
                "found_per_keyword": found_per_keyword(keywords, r["missed"])}
    out = detection_file(thresholds, smoothing, args.refractory_ms, tuned_on)
    with open(args.output, "w") as f:
        json.dump(out, f, indent=1)
    if args.curve_json:
        with open(args.curve_json, "w") as f:
            json.dump(trade_off(rows, r, out), f, indent=1)
    chosen = ("thresholds " + " ".join(f"{l} {t:g}" for l, t in zip(labels, thresholds)) if args.per_keyword
              else f"threshold {thr:g}")
    print(f"chose {chosen}, smoothing {smoothing}: recall {r['recall']:.3f}, "
          f"{r['false_alarms']} false alarms -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

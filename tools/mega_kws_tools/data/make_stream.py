#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Build a continuous evaluation recording from one split of a Speech Commands-style dataset.

  make_stream.py --data DIR --split testing --minutes 10 --out stream.wav --labels-out stream.csv [--seed 2]

DIR is a folder laid out like Speech Commands (<label>/<name>.wav,
validation_list.txt, testing_list.txt), e.g. the output of make_sc10.py;
only clips of --split are used (training = not in either list).

The recording (16 kHz, mono, 16-bit) alternates two kinds of segments over a
continuous background bed (quiet dither, white / pink / brown noise, mains
hum, or babble made of _unknown_ words; cross-faded between segments):

  * active segments (15..45 s): keywords (in shuffled rounds of all ten, so
    each occurs about equally often) spaced apart (from one word's end to the
    next word's start 1.5..4 s), interleaved with _unknown_ words (20 %);
  * keyword-free stretches (8..35 s, at least --keyword-free of the duration,
    default 0.45, never below 0.40): rapid or sparse _unknown_ speech, louder
    noise with _silence_ clips sprinkled in, or near-silence.

Each word is the part of its 1 s clip around the word (0.12 s before its
onset to 0.2 s after its offset, 10 ms fades), so the clip's own noise floor
only comes along briefly. Word boundaries inside each clip are energy based:
make_sc10.py's manifest.csv gives them exactly (the energy-trimmed clean word:
offset_s, word_dur_s); for clips without a manifest row they are measured on
the clip itself (5 ms frame energy against the clip's noise floor). With a
manifest, clips with little added noise (none or SNR >= 20 dB) are preferred
(--any-noise turns that off); clips are reused only after every eligible clip
of the label has been used once. With --once PLAYED.txt no keyword or word
clip is played twice, within the recording or across the recordings that
share PLAYED.txt (babble beds and _silence_ clips still reuse clips): one
clip a model mistakes then counts one false alarm, not one per replay.

The CSV (--labels-out) has one row per event, sorted by time:

  kind,onset_s,offset_s,label,detail,source
  keyword,12.345,12.790,yes,yes,yes/abcd1234_00012_nohash_0.wav
  unknown,15.020,15.410,_unknown_,cup,_unknown_/...
  keyword_free,40.000,62.500,keyword_free,speech/pink,

kind=keyword: every keyword occurrence (onset_s / offset_s = word boundaries
in the stream); kind=unknown: every other word; kind=keyword_free: a marked
stretch (onset_s = start, offset_s = end) that holds no keyword at all
(detail = stretch type / bed type). A detector should fire inside
[onset_s, offset_s + latency] of each keyword and never inside a
keyword_free stretch.
"""

import argparse
import csv
import os
import sys
import time

import numpy as np

from mega_kws_tools.audio import read_wav, write_wav
from mega_kws_tools.data import make_sc10 as sc  # (noise generators, PCM helpers)
from mega_kws_tools.data.layout import NOISE, clip_splits

SR = sc.SR
KEYWORDS = sc.KEYWORDS
PRE_S, POST_S, FADE_S = 0.12, 0.20, 0.010  # cut around each word
XFADE_S = 0.05                               # bed cross-fade between segments
EDGE_S = 0.3                                 # keep word cuts this far inside their segment


def read_clip(path: str) -> np.ndarray:
    return read_wav(path).astype(np.float32) / 32768.0


def energy_bounds(x: np.ndarray):
    """(onset_s, offset_s) of the word in a clip from 5 ms frame energy vs. the clip's noise floor; None if flat."""
    hop = SR // 200
    n = len(x) // hop
    e = np.sqrt(np.mean(np.square(x[: n * hop].reshape(n, hop), dtype=np.float64), axis=1))
    e = 20 * np.log10(np.convolve(e, np.ones(3) / 3, mode="same") + 1e-7)
    floor, top = np.percentile(e, 10), e.max()
    if top - floor < 8:
        return None
    thr = max(floor + 0.35 * (top - floor), top - 40)
    on = e > thr
    # drop isolated blips shorter than 20 ms (clicks, noise peaks)
    idx = np.nonzero(on)[0]
    runs, start = [], idx[0]
    for a, b in zip(idx[:-1], idx[1:]):
        if b != a + 1:
            runs.append((start, a))
            start = b
    runs.append((start, idx[-1]))
    long_runs = [r for r in runs if r[1] - r[0] + 1 >= 4] or [max(runs, key=lambda r: r[1] - r[0])]
    return long_runs[0][0] * hop / SR, (long_runs[-1][1] + 1) * hop / SR


def load_split(data: str, split: str):
    """{folder: [relative paths]} for the clips of `split`."""
    out = {}
    for rel, s in clip_splits(data).items():
        folder = rel.split("/")[0]
        if s == split and folder != NOISE:
            out.setdefault(folder, []).append(rel)
    return out


class UsedUp(Exception):
    """--once: every clip a class may still play has been played."""


class Picker:
    """Draws clips of one class without replacement (preferred ones first), refilling when used up.
    With once=True it never refills (UsedUp instead); a clip drawn but not placed goes back
    (put_back)."""

    def __init__(self, rng, paths, preferred, once=False, name=""):
        self.rng, self.paths, self.preferred, self.queue = rng, list(paths), preferred, []
        self.once, self.name, self.playable = once, name, None

    def next(self):
        if not self.queue:
            if self.once and self.playable is not None:
                raise UsedUp(f"all {self.playable} playable {self.name} clips of the split are used up (of "
                             f"{len(self.paths)} not played before; noisier ones only play when no clip "
                             "is quiet, or with --any-noise)")
            good = [p for p in self.paths if self.preferred(p)]
            rest = [p for p in self.paths if not self.preferred(p)]
            self.rng.shuffle(good)
            self.rng.shuffle(rest)
            self.queue = good if good else rest  # the rest only when no clip is preferred
            self.playable = len(self.queue)
        return self.queue.pop(0)

    def put_back(self, path):
        if self.once:
            self.queue.insert(0, path)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--split", default="testing", choices=["training", "validation", "testing"])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--out", required=True, help="output WAV")
    ap.add_argument("--labels-out", required=True, help="output CSV")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--keyword-free", type=float, default=0.45, help="target share of marked keyword-free time")
    ap.add_argument("--gap-min", type=float, default=1.5)
    ap.add_argument("--gap-max", type=float, default=4.0)
    ap.add_argument("--any-noise", action="store_true", help="do not prefer clips with little added noise")
    ap.add_argument("--once", metavar="PLAYED.txt",
                    help="play every keyword and word clip at most once, also across recordings: clips listed "
                         "in PLAYED.txt (one path per line, if it exists) are not played, and the clips this "
                         "recording plays are added to it. Fails, writing nothing, when a class runs out. "
                         "Babble beds and _silence_ clips still reuse clips.")
    return ap.parse_args(argv)


class Recording:
    """One recording being made: the clips and how they are drawn, the samples
    so far (y) and what was placed in them (events)."""

    def __init__(self, args):
        self.args = args
        self.rng = rng = np.random.default_rng(args.seed)
        self.kf_target = max(args.keyword_free, 0.40)
        clips = load_split(args.data, args.split)
        self.kw_labels = [k for k in KEYWORDS if clips.get(k)]
        unk_paths = [p for f, ps in clips.items() if f not in KEYWORDS and f != "_silence_" for p in ps]
        sil_paths = clips.get("_silence_", [])
        if not self.kw_labels or not unk_paths:
            sys.exit(f"make_stream: {args.data} split {args.split} needs keyword and _unknown_ clips")
        self.manifest = {}
        mpath = os.path.join(args.data, "manifest.csv")
        if os.path.exists(mpath):
            with open(mpath) as f:
                self.manifest = {r["path"]: r for r in csv.DictReader(f)}
        self.played = set()
        if args.once and os.path.exists(args.once):
            with open(args.once) as f:
                self.played = {line.strip() for line in f if line.strip()}
        once = self.once = bool(args.once)
        self.pick_kw = {k: Picker(rng, [p for p in clips[k] if p not in self.played], self.low_noise, once, k)
                        for k in self.kw_labels}
        self.pick_unk = Picker(rng, [p for p in unk_paths if p not in self.played], self.low_noise, once, "_unknown_")
        # babble beds draw from every clip of the split (with --once, apart from the words played)
        self.pick_babble = Picker(rng, unk_paths, self.low_noise) if once else self.pick_unk
        self.pick_sil = Picker(rng, sil_paths, lambda p: True) if sil_paths else None
        self.kw_order = []
        self.cache, self.bound_src, self.disagree = {}, {"manifest": 0, "energy": 0, "whole": 0}, []
        self.total = int(round(args.minutes * 60 * SR))
        self.T = self.total / SR
        self.y = np.zeros(self.total, np.float64)
        self.events = []

    def low_noise(self, p):
        r = self.manifest.get(p)
        return self.args.any_noise or r is None or r.get("snr_db", "") == "" or float(r["snr_db"]) >= 20

    def next_keyword(self):
        """Keywords in shuffled rounds, so each one occurs about equally often."""
        if not self.kw_order:
            self.kw_order.extend(self.rng.permutation(self.kw_labels).tolist())
        return self.kw_order.pop()

    def word(self, path):
        """(cut audio, onset within cut, offset within cut, word text) for a clip."""
        if path in self.cache:
            return self.cache[path]
        x = read_clip(os.path.join(self.args.data, path))
        eb = energy_bounds(x)
        r = self.manifest.get(path)
        if r is not None and r.get("offset_s"):
            on = float(r["offset_s"])
            off = on + float(r["word_dur_s"])
            self.bound_src["manifest"] += 1
            if eb is not None:
                self.disagree.append(max(abs(eb[0] - on), abs(eb[1] - off)))
        elif eb is not None:
            on, off = eb
            self.bound_src["energy"] += 1
        else:
            on, off = 0.0, len(x) / SR
            self.bound_src["whole"] += 1
        a = max(0, int((on - PRE_S) * SR))
        b = min(len(x), int(np.ceil((off + POST_S) * SR)))
        cut = x[a:b].copy()
        f = int(FADE_S * SR)
        ramp = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, f))
        cut[:f] *= ramp
        cut[-f:] *= ramp[::-1]
        text = (r.get("word") if r is not None else "") or path.split("/")[0]
        self.cache[path] = (cut, on - a / SR, off - a / SR, text)
        return self.cache[path]

    def place(self, path, onset_s, kind, label):
        cut, on, off, text = self.word(path)
        p = int(round((onset_s - on) * SR))
        a, b = max(0, p), min(self.total, p + len(cut))
        self.y[a:b] += cut[a - p: b - p]
        self.events.append((kind, onset_s, onset_s + (off - on), label, text, path))

    def plan(self):
        """The segments [kind, start, end]: keyword-free first, then alternating,
        the keyword-free share kept at least kf_target."""
        rng, T, kf_target = self.rng, self.T, self.kf_target
        segs = []
        first = float(rng.uniform(4, 10))
        segs.append(["kf", 0.0, first])
        t, kf_total = first, first
        while T - t > 60:
            if segs[-1][0] == "kf":
                L = float(rng.uniform(15, 45))
                segs.append(["active", t, t + L])
            else:
                need = (kf_target * (t + 8) - kf_total) / (1 - kf_target)
                L = max(float(rng.uniform(8, 35)), need)
                segs.append(["kf", t, t + L])
                kf_total += L
            t += L
        need = max(0.0, kf_target * T - kf_total)
        R = T - t
        if need >= R - 10:
            segs.append(["kf", t, T])
        else:
            need = max(need, 6.0)
            segs.append(["active", t, T - need])
            segs.append(["kf", T - need, T])
        merged = []
        for s in segs:
            if merged and merged[-1][0] == s[0]:
                merged[-1][2] = s[2]
            else:
                merged.append(s)
        return merged

    def bed(self, kind, n, level_db):
        """n samples of background of one kind at level_db."""
        rng = self.rng
        if kind == "babble":
            z = np.zeros(n)
            for _ in range(int(n / SR * 4)):
                cut = self.word(self.pick_babble.next())[0]
                p = int(rng.integers(-len(cut) // 2, n))
                a, b = max(0, p), min(n, p + len(cut))
                if b > a:
                    z[a:b] += cut[a - p: b - p] * 10 ** (rng.uniform(-10, 0) / 20)
            z /= max(sc.rms(z), 1e-12)
        elif kind == "quiet":
            z = sc.colored_noise(rng, n, "white")
        elif kind == "hum":
            z = sc.hum(rng, n)
        else:
            z = sc.colored_noise(rng, n, kind)
        return z * 10 ** (level_db / 20)

    def draw_bed(self, kind):
        """(stretch type, bed type, level in dB) of a segment."""
        rng = self.rng
        if kind == "active":
            bk = str(rng.choice(["quiet", "white", "pink", "brown", "hum"], p=[0.3, 0.15, 0.25, 0.15, 0.15]))
            return "active", bk, rng.uniform(-80, -65) if bk == "quiet" else rng.uniform(-65, -40)
        sub = str(rng.choice(["speech", "mixed", "noise", "quiet"], p=[0.3, 0.25, 0.3, 0.15]))
        if sub == "noise":
            bk = str(rng.choice(["white", "pink", "brown", "hum", "babble"]))
            return sub, bk, rng.uniform(-45, -22)
        if sub == "quiet":
            return sub, "quiet", rng.uniform(-85, -65)
        bk = str(rng.choice(["quiet", "pink", "brown", "hum", "babble"], p=[0.3, 0.25, 0.15, 0.15, 0.15]))
        return sub, bk, rng.uniform(-80, -65) if bk == "quiet" else rng.uniform(-60, -38)

    def run_words(self, s0, s1, gap_lo, gap_hi, p_kw):
        """Words one after another from s0 until the next would pass s1."""
        rng = self.rng
        t_on = s0 + EDGE_S + PRE_S + float(rng.uniform(0.2, 1.2))
        while True:
            is_kw = rng.random() < p_kw
            path = self.pick_kw[self.next_keyword()].next() if is_kw else self.pick_unk.next()
            cut, on, off, _ = self.word(path)
            if t_on + (len(cut) / SR - on) > s1 - EDGE_S:
                if is_kw:  # not used: it comes first in the next segment
                    self.kw_order.append(path.split("/")[0])
                (self.pick_kw[path.split("/")[0]] if is_kw else self.pick_unk).put_back(path)
                break
            label = path.split("/")[0] if is_kw else "_unknown_"
            self.place(path, t_on, "keyword" if is_kw else "unknown", label)
            t_on += (off - on) + float(rng.uniform(gap_lo, gap_hi))

    def run_silence(self, s0, s1):
        """_silence_ clips (noise, hum) now and then from s0 to s1."""
        rng, y, total = self.rng, self.y, self.total
        t_s = s0 + EDGE_S + float(rng.uniform(0, 3))
        while t_s + 1.0 < s1 - EDGE_S:
            x = read_clip(os.path.join(self.args.data, self.pick_sil.next()))
            p = int(t_s * SR)
            f = int(0.05 * SR)
            x = x.copy()
            x[:f] *= np.linspace(0, 1, f)
            x[-f:] *= np.linspace(1, 0, f)
            y[p: p + len(x)] += x[: total - p]
            t_s += 1.0 + float(rng.uniform(1, 6))

    def fill(self, seg):
        """A segment's bed (cross-faded into its neighbours) and what is said over it."""
        kind, s0, s1 = seg
        sub, bk, lvl = self.draw_bed(kind)
        seg.append(f"{sub}/{bk}")
        xf = int(XFADE_S * SR)
        a, b = int(s0 * SR) - xf, int(s1 * SR) + xf
        z = self.bed(bk, b - a, lvl)
        r = np.sin(np.linspace(0, np.pi / 2, 2 * xf))  # equal-power cross-fade
        z[: 2 * xf] *= r
        z[-2 * xf:] *= r[::-1]
        lo, hi = max(a, 0), min(b, self.total)
        self.y[lo:hi] += z[lo - a: hi - a]
        if sub == "active":
            self.run_words(s0, s1, self.args.gap_min, self.args.gap_max, 0.8)
        elif sub == "speech":
            self.run_words(s0, s1, 0.3, 2.5, 0.0)
        elif sub == "mixed":
            self.run_words(s0, s1, 1.0, 4.0, 0.0)
        if kind == "kf" and sub in ("noise", "quiet") and self.pick_sil is not None:
            self.run_silence(s0, s1)

    def write(self, segs):
        """The WAV (scaled down if it would clip), its labels, and the played list; returns the scale."""
        args, y, events = self.args, self.y, self.events
        sources = [e[5] for e in events]
        if self.once and (len(set(sources)) != len(sources) or self.played.intersection(sources)):
            sys.exit("make_stream: --once: a clip was played twice (internal error; nothing written)")
        pk = sc.peak(y)
        scale = 1.0
        if pk > 0.98:
            scale = 0.98 / pk
            y *= scale
        write_wav(args.out, sc.to_pcm16(self.rng, y))
        rows = [(k, on, off, lab, det, src) for k, on, off, lab, det, src in events]
        rows += [("keyword_free", s0, s1, "keyword_free", det, "") for kind, s0, s1, det in segs if kind == "kf"]
        rows.sort(key=lambda r: (r[1], r[0]))
        with open(args.labels_out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kind", "onset_s", "offset_s", "label", "detail", "source"])
            for k, on, off, lab, det, src in rows:
                w.writerow([k, f"{on:.3f}", f"{off:.3f}", lab, det, src])
        if self.once:
            with open(args.once, "a") as f:
                f.writelines(p + "\n" for p in sources)
        return pk, scale

    def summary(self, segs, pk, scale, t_start):
        """Prints what was made; exits if a keyword fell into a keyword-free stretch."""
        events, T = self.events, self.T
        kws = sorted([e for e in events if e[0] == "keyword"], key=lambda e: e[1])
        kf = [(s0, s1) for kind, s0, s1, _ in segs if kind == "kf"]
        kf_time = sum(b - a for a, b in kf)
        inside = sum(1 for e in kws for a, b in kf if e[2] > a and e[1] < b)
        gaps = [b[1] - a[2] for a, b in zip(kws[:-1], kws[1:])]
        per = {k: sum(e[3] == k for e in kws) for k in self.kw_labels}
        counts = " ".join(f"{k}:{v}" for k, v in per.items())
        print(f"wrote {self.args.out}: {T:.1f} s, {len(kws)} keywords ({counts}), "
              f"{sum(e[0] == 'unknown' for e in events)} unknown words")
        print(f"keyword-free: {len(kf)} stretches, {kf_time:.1f} s = {100 * kf_time / T:.1f} % "
              f"(keywords inside: {inside}); min keyword gap {min(gaps) if gaps else 0:.2f} s; "
              f"peak {sc.db(pk * scale):.1f} dBFS{' (scaled down)' if scale < 1 else ''}")
        msg = f"word boundaries: {self.bound_src}"
        if self.disagree:
            d = np.array(self.disagree)
            msg += (f"; energy estimate vs manifest: median {1000 * np.median(d):.0f} ms, "
                    f"p90 {1000 * np.percentile(d, 90):.0f} ms")
        print(msg + f"; {time.time() - t_start:.1f} s")
        if inside or kf_time < 0.4 * T - 1e-6:
            sys.exit("make_stream: keyword-free constraint violated")


def main():
    args = parse_args()
    t_start = time.time()
    rec = Recording(args)
    segs = rec.plan()
    for seg in segs:
        rec.fill(seg)
    pk, scale = rec.write(segs)
    rec.summary(segs, pk, scale, t_start)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UsedUp as e:  # raised before anything is written
        sys.exit(f"make_stream: --once: {e}; a recording this long needs more clips (nothing written)")

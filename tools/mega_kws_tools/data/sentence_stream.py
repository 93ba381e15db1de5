#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Keywords inside running speech, scanned whole: speechocean762's sentences
that hold a keyword, back to back, with the forced-aligned keyword times
(sentence_keywords.py's align.tsv) as the truth. The spliced recordings replay
2-3 real validation clips of `on`, `off` and `go`; this recording has every
keyword the validation speakers said inside a sentence (35 `on`, 33 `go`),
and the rest of their sentences as keyword-free speech.

  python3 -m mega_kws_tools.data.sentence_stream --repo MIRROR/jimbozhang+speechocean762/repo \
      --align work/data/so762kw/align.tsv --out work/data/so762/keyword_sentences_validation

A sentence is played when every keyword in its transcript was placed by the
aligner (align.tsv has as many rows for it as the transcript has keywords)
and it holds no homophone of a keyword (KNOW, WRITE: speechocean.py's rule);
the others are left out and counted. Each sentence follows 0.3-1.5 s of quiet
room-like noise (speechocean.py's), as in the keyword-free recording.

Labels (OUT.csv, make_stream.py's format, in time order):
  keyword       the aligned word, onset and offset in the recording
  keyword_free  the gaps and the stretches of sentences at least GUARD_BEFORE_S
                before a keyword's onset and MATCH_AFTER_OFFSET_S (the scorer's
                reach) after its offset: a detection there is a false alarm
                counted per keyword-free hour; one near a keyword that is not
                the keyword is a false alarm, not counted per hour.
Only the corpus's train/ half is read (speechocean.train_utterances), and only
the speakers of --split (speechocean.py's speaker split).

--windows DIR writes, instead, the keywords in their context as one-second
clips in the Speech Commands layout (train.py --extra-data, stream_embed
clips): for each aligned keyword of a playable sentence of any speaker, WINDOWS
clips of the sentence that end END_AFTER_S after the word's offset (drawn),
so the words before it are in the clip as they are in a stream; a clip that
would reach another keyword of the sentence is not written. The validation
speakers' clips are listed in DIR/validation_list.txt. --others N adds, per
playable sentence, N clips of the same sentence's keyword-free speech under
DIR/speech/ (the trainer's `_unknown_`): one-second windows that end where the
recording's labels are keyword_free (at least GUARD_BEFORE_S before a keyword
and MATCH_AFTER_OFFSET_S after one) and hold speech, drawn with their own
generator, so the keywords' clips are those written without it. --source cathy reads
rhasspy/dataset-voice-cathy (sentence_keywords.py's sources), one speaker, all
training. Never commit the audio."""

import argparse
import csv
import os
import sys

import numpy as np

from mega_kws_tools.audio import SR, read_wav, window_before, write_wav
from mega_kws_tools.data import speechocean as so
from mega_kws_tools.data.layout import KEYWORDS
from mega_kws_tools.data import sentence_keywords as sk
from mega_kws_tools.data.sentence_keywords import words_of

GUARD_BEFORE_S = 0.3  # the aligner's onsets can be a frame or two late
# the scorer's reach after a keyword's offset (evaluation.streamscore.MATCH_AFTER_OFFSET_S; the test
# checks they agree: data does not import evaluation)
MATCH_AFTER_OFFSET_S = 1.25
HOP_S = 0.05  # --others: the grid of the windows' ends
END_AFTER_S = (0.05, 0.45)  # --windows: where a clip ends after its keyword's offset
WINDOWS = 2  # --windows: clips per keyword
OTHERS_FOLDER = "speech"  # --others: not a label, so the trainer's `_unknown_` (speechocean.py's windows' folder)


def read_align(path: str, split: str = None) -> dict:
    """{utt: [(word, start_s, end_s)]} of align.tsv's rows of split (every row when None)."""
    out = {}
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            if split is None or r["split"] == split:
                out.setdefault(r["utt"], []).append((r["word"], float(r["start_s"]), float(r["end_s"])))
    return out


def playable(words: list, placed: list) -> str:
    """'' when the sentence (its words_of) can be played, else why not."""
    if {w.upper() for w in words} & so.HOMOPHONES:
        return "homophone"
    said = sorted(w for w in words if w in KEYWORDS)
    return "" if said == sorted(w for w, _, _ in placed) else "unplaced"


def free_stretches(span: tuple, guards: list) -> list:
    """The parts of span (a, b) outside every guard interval."""
    out, a = [], span[0]
    for g0, g1 in sorted(guards):
        if g1 <= a or g0 >= span[1]:
            continue
        if g0 > a:
            out.append((a, g0))
        a = max(a, g1)
    if a < span[1]:
        out.append((a, span[1]))
    return out


def guard(onset: float, offset: float) -> tuple:
    """Where a detection is not keyword-free around a keyword (the module's docstring)."""
    return onset - GUARD_BEFORE_S, offset + MATCH_AFTER_OFFSET_S


def other_ends(rng, x: np.ndarray, placed: list, n: int) -> list:
    """Up to n drawn sample positions (sorted) where a one-second window of the
    sentence x may end and be keyword-free: on a HOP_S grid inside the free
    stretches, each window holding speech (speechocean.speech_windows' rule: its
    RMS at least a quarter of the loudest window's)."""
    hop = int(HOP_S * SR)
    ends = np.arange(SR // 4, len(x) + 1, hop)
    free = free_stretches((0.0, len(x) / SR), [guard(s, e) for _, s, e in placed])
    ends = ends[[any(a <= e / SR <= b for a, b in free) for e in ends]]
    padded = np.concatenate([np.zeros(SR, np.float64), x.astype(np.float64)])
    rms = lambda e: np.sqrt(np.mean(padded[e:e + SR] ** 2))  # the window ending at e, zeros before the start
    loudest = max(rms(e) for e in range(0, len(x) + 1, hop))
    good = [e for e in ends if rms(e) >= 0.25 * loudest > 0]
    return sorted(int(e) for e in rng.choice(good, size=min(n, len(good)), replace=False)) if good else []


def build(repo: str, align: str, out: str, split: str, rev: str, seed: int) -> dict:
    placed = read_align(align, split)
    gap_rng = np.random.default_rng(seed)
    audio, segments, keywords, skipped, t = [], [], [], {"homophone": 0, "unplaced": 0}, 0
    for utt, spk, path, text in list(so.train_utterances(repo, rev)):  # all checked before any is read
        words = words_of(text)
        if so.speaker_split(spk) != split or not set(words) & set(KEYWORDS):
            continue
        why = playable(words, placed.get(utt, []))
        if why:
            skipped[why] += 1
            continue
        x = read_wav(so.git_show(repo, f"{rev}:{path}"), path)
        gap = so.quiet_noise(gap_rng, int(gap_rng.uniform(*so.GAP_S) * SR))
        segments.append((t / SR, (t + len(gap)) / SR, "gap/quiet", ""))
        t += len(gap)
        segments.append((t / SR, (t + len(x)) / SR, "speech/read", f"speechocean762/{utt}: {text}"))
        keywords += [(t / SR + s, t / SR + e, w, f"speechocean762/{utt}: {text}") for w, s, e in placed[utt]]
        audio += [gap, x]
        t += len(x)
    if not keywords:
        raise SystemExit(f"{align}: no sentence of {split} speakers can be played")
    guards = [guard(a, b) for a, b, _, _ in keywords]
    rows = [("keyword", a, b, w, w, src) for a, b, w, src in keywords]
    for a, b, detail, src in segments:
        rows += [("keyword_free", f0, f1, "keyword_free", detail, src) for f0, f1 in free_stretches((a, b), guards)]
    rows.sort(key=lambda r: (r[1], r[0]))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    write_wav(out + ".wav", np.concatenate(audio))
    with open(out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "onset_s", "offset_s", "label", "detail", "source"])
        w.writerows((k, f"{a:.3f}", f"{b:.3f}", label, detail, src) for k, a, b, label, detail, src in rows)
    per_word = {k: sum(w == k for _, _, w, _ in keywords) for k in KEYWORDS}
    return {"sentences": sum(d == "speech/read" for _, _, d, _ in segments), "left_out": skipped,
            "keywords": per_word, "hours": round(t / SR / 3600, 3),
            "keyword_free_hours": round(sum(r[2] - r[1] for r in rows if r[0] == "keyword_free") / 3600, 3)}


def windows(utterances, align: str, out: str, seed: int, credit: str, others: int = 0) -> dict:
    """The keywords of the playable sentences in context: WINDOWS one-second clips
    each, and `others` clips of each sentence's keyword-free speech (the module's
    docstring), written under out in the Speech Commands layout."""
    placed = read_align(align)
    rng, other_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    val, counts, skipped = [], {}, {"homophone": 0, "unplaced": 0, "crowded": 0}

    def write(name, x, b, split):
        os.makedirs(os.path.join(out, os.path.dirname(name)), exist_ok=True)
        write_wav(os.path.join(out, name), window_before(x, b, SR))
        folder = os.path.dirname(name)
        counts.setdefault(split, {}).setdefault(folder, 0)
        counts[split][folder] += 1
        if split == "validation":
            val.append(name)

    for utt, _, split, x, words in utterances:
        why = playable(words, placed.get(utt, []))
        if why:
            skipped[why] += 1
            continue
        for k, b in enumerate(other_ends(other_rng, x, placed[utt], others) if others else []):
            write(f"{OTHERS_FOLDER}/{utt}_{k}.wav", x, b, split)
        for i, (w, start, end) in enumerate(placed[utt]):
            for k in range(WINDOWS):
                b = min(len(x), int((end + rng.uniform(*END_AFTER_S)) * SR))
                a = b - SR
                if any(j != i and e2 > a / SR and s2 < b / SR for j, (_, s2, e2) in enumerate(placed[utt])):
                    skipped["crowded"] += 1
                    continue
                write(f"{w}/{utt}_{i}_{k}.wav", x, b, split)
    with open(os.path.join(out, "validation_list.txt"), "w") as f:
        f.writelines(v + "\n" for v in val)
    open(os.path.join(out, "testing_list.txt"), "w").close()
    with open(os.path.join(out, "SOURCES.txt"), "w") as f:
        f.write(f"{credit}; keywords in their sentences' context, placed by forced alignment "
                f"(mega_kws_tools.data.sentence_stream --windows{f' --others {others}' if others else ''})\n")
    return {"clips": counts, "left_out": skipped}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="the git directory fetched for github:" + so.REPO)
    ap.add_argument("--align", required=True, help="sentence_keywords.py's align.tsv of speechocean762")
    ap.add_argument("--out", help="writes OUT.wav and OUT.csv")
    ap.add_argument("--windows", metavar="DIR", help="instead of --out: the keywords in context as clips")
    ap.add_argument("--others", type=int, default=0, metavar="N",
                    help="with --windows: also N clips of each sentence's keyword-free speech, as speech/ (default 0)")
    ap.add_argument("--source", choices=sorted(sk.SOURCES), default="speechocean762",
                    help="with --windows: whose sentences (default speechocean762)")
    ap.add_argument("--split", choices=("validation", "training"), default="validation",
                    help="whose sentences (speechocean.py's speaker split; default validation)")
    ap.add_argument("--rev", help="commit to read (default: the one this project uses for the source)")
    ap.add_argument("--seed", type=int, default=763, help="the gaps' draws")
    args = ap.parse_args()
    if not os.path.isfile(args.align):
        ap.error(f"--align {args.align}: no such file (make it with mega_kws_tools.data.sentence_keywords)")
    if bool(args.out) == bool(args.windows):
        ap.error("give --out PREFIX (the recording) or --windows DIR (the clips)")
    if args.others < 0 or (args.others and not args.windows):
        ap.error(f"--others {args.others}: a count of clips per sentence, with --windows")
    if args.windows:
        repo_name, commit, utterances, credit = sk.SOURCES[args.source]
        rev = args.rev or commit
        print(windows(utterances(args.repo, rev), args.align, args.windows, args.seed, f"{repo_name} {rev} {credit}",
                      args.others))
    elif args.source != "speechocean762":
        ap.error("--source: the recording is speechocean762's (its speaker split)")
    else:
        print(build(args.repo, args.align, args.out, args.split, args.rev or so.COMMIT, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())

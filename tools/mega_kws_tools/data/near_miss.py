#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Near misses inside running speech: two-second windows of read sentences
that end just after a word that sounds like a keyword (one, an, in, upon for
`on`; of, if for `off`; good, so, gold for `go` ...), labelled `_unknown_`,
in the hard examples' format (training.mine_hard's .npz: `audio` [N, 2 s] int16,
`labels`), for train.py --hard-examples.

  python3 -m mega_kws_tools.data.near_miss --source speechocean762 \
      --repo MIRROR/jimbozhang+speechocean762/repo --split training -o work/data/nearmiss-so-training.npz
  python3 -m mega_kws_tools.data.near_miss --source cathy \
      --repo MIRROR/rhasspy+dataset-voice-cathy/repo -o work/data/nearmiss-cathy.npz

Each sentence whose transcript holds one of WORDS is aligned word by word
(sentence_keywords.py's pocketsphinx grammar of exactly the sentence). For each
such word, up to --per-word windows end END_AFTER_S after its offset (drawn:
the keyword clips in context of sentence_stream.py end there too), so a window
ends as a keyword's would, with the words before it as a stream has them; the
start or end of the sentence is padded with silence. A window whose end lies
where a keyword's detection counts as a hit (sentence_stream.guard: 0.3 s
before a keyword's onset to 1.25 s after its offset) is not written; nor is a
word the aligner squeezed (shorter than sentence_keywords.MIN_WORD_S). At most
--max-per-word windows of each word are kept (drawn), so that `in` and `and`
do not drown the rest. Only the corpus's train/ half is read, only the
speakers of --split (speechocean.py's split); cathy is one speaker, all
training. Never commit the audio.
"""

import argparse
import sys
from collections import Counter

import numpy as np

from mega_kws_tools.audio import SR, window_before
from mega_kws_tools.data import sentence_keywords as sk
from mega_kws_tools.data import speechocean as so
from mega_kws_tools.data.layout import KEYWORDS
from mega_kws_tools.data.sc10_recipe import CONFUSABLE
from mega_kws_tools.data.sentence_stream import END_AFTER_S, guard

# the near misses of the synthetic sets, and the frequent words of read speech that come
# closest to the three weakest keywords: one won and upon (on), if (off), so ago (go)
WORDS = tuple(CONFUSABLE) + ("one", "won", "and", "upon", "if", "so", "ago")
LABEL = "_unknown_"
assert not set(WORDS) & set(KEYWORDS) and len(set(WORDS)) == len(WORDS)


def window(x: np.ndarray, end: int) -> np.ndarray:
    """The two seconds of x before sample `end`, padded with silence where x does not reach."""
    return window_before(x, end, 2 * SR)


def windows_of(rng, x: np.ndarray, segs: list, words: set, per_word: int) -> list:
    """[(word, end_s, window)] for each aligned word of `words` in segs (the sentence's
    (word, start_s, end_s)): per_word windows ending a drawn END_AFTER_S after it, none
    whose end a keyword's guard covers."""
    guards = [guard(s, e) for w, s, e in segs if w in KEYWORDS]
    out = []
    for w, s, e in segs:
        if w not in words or e - s < sk.MIN_WORD_S:
            continue
        for end_s in sorted(e + rng.uniform(*END_AFTER_S, size=per_word)):
            if not any(a <= end_s <= b for a, b in guards):
                out.append((w, float(end_s), window(x, int(round(end_s * SR)))))
    return out


def build(utterances, words: set, per_word: int, max_per_word: int, seed: int) -> dict:
    """Aligns each utterance (sentence_keywords' (utt, speaker, split, samples, words)),
    cuts its near-miss windows and keeps at most max_per_word of each word (drawn)."""
    aligner = sk.decoder()
    rng = np.random.default_rng(seed)
    found, stats = [], Counter()
    for utt, _, _, x, text in utterances:
        stats["sentences"] += 1
        segs = sk.align(aligner, text, x)
        if not segs:
            stats["unaligned"] += 1
            continue
        found += [(w, utt, end_s, win) for w, end_s, win in windows_of(rng, x, segs, words, per_word)]
    keep = []
    for w in sorted({f[0] for f in found}):
        idx = [i for i, f in enumerate(found) if f[0] == w]
        keep += sorted(rng.choice(idx, size=min(max_per_word, len(idx)), replace=False).tolist())
    keep.sort()
    rows = [found[i] for i in keep]
    return {"audio": np.stack([r[3] for r in rows]) if rows else np.zeros((0, 2 * SR), np.int16),
            "labels": np.array([LABEL] * len(rows)), "words": np.array([r[0] for r in rows]),
            "utts": np.array([r[1] for r in rows]), "times_s": np.array([r[2] for r in rows]),
            "stats": dict(stats), "counts": dict(Counter(r[0] for r in rows))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", choices=sorted(sk.SOURCES), default="speechocean762")
    ap.add_argument("--repo", required=True, help="the git directory fetched for github:<the source's repository>")
    ap.add_argument("--split", choices=("training", "validation"), default="training",
                    help="speechocean762: whose sentences (speechocean.py's speaker split); cathy is training only")
    ap.add_argument("--words", help=f"comma-separated words to end windows after (default: {len(WORDS)} near misses)")
    ap.add_argument("--per-word", type=int, default=2, help="windows per word said (default 2)")
    ap.add_argument("--max-per-word", type=int, default=150, help="windows kept per word, drawn (default 150)")
    ap.add_argument("--seed", type=int, default=764)
    ap.add_argument("--rev", help="commit to read (default: the one this project uses for the source)")
    ap.add_argument("-o", "--out", required=True, help="the .npz to write")
    args = ap.parse_args(argv)
    words = set(args.words.split(",")) if args.words else set(WORDS)
    if set(KEYWORDS) & words:
        ap.error(f"--words: {', '.join(sorted(set(KEYWORDS) & words))} are keywords, not near misses")
    if args.per_word < 1 or args.max_per_word < 1:
        ap.error("--per-word and --max-per-word must be at least 1")
    if args.source == "cathy" and args.split != "training":
        ap.error("--source cathy: one speaker, so training only")
    try:
        import pocketsphinx  # noqa: F401
    except ImportError:
        ap.error("needs Debian's python3-pocketsphinx and pocketsphinx-en-us (apt-get install them)")
    _, commit, utterances, credit = sk.SOURCES[args.source]
    rev = args.rev or commit
    out = build(utterances(args.repo, rev, words, args.split), words, args.per_word, args.max_per_word, args.seed)
    stats, counts = out.pop("stats"), out.pop("counts")
    np.savez(args.out, source=np.array(f"{args.source} {rev} ({credit})"), **out)
    print(f"{stats}; {len(out['labels'])} windows in {args.out}: "
          + ", ".join(f"{w} {n}" for w, n in sorted(counts.items(), key=lambda t: -t[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

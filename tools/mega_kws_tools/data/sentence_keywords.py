#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Keywords said inside read sentences, cut out by forced alignment: real
`on`, `go`, `no`, `up`, `off`... where Speech Commands gives the project 15-16
real clips of `on`, `off` and `go`.

  python3 -m mega_kws_tools.data.sentence_keywords --source speechocean762 \
      --repo work/sources/jimbozhang+speechocean762/repo --out work/data/so762kw
  python3 -m mega_kws_tools.data.sentence_keywords --source cathy \
      --repo work/sources/rhasspy+dataset-voice-cathy/repo --out work/data/cathykw

Sources: speechocean762 (its train/ half only, 125 speakers, Mandarin first
language, half of them children; speechocean.py's speaker split, so its
validation speakers' cuts are listed for validation; the test/ half is never
opened) and rhasspy/dataset-voice-cathy (CMU ARCTIC prompts read by one
native speaker, 48 kHz stereo, brought to 16 kHz mono by sox: all training,
since one speaker cannot be split).

For every sentence that holds one of the ten keywords, pocketsphinx (Debian's
python3-pocketsphinx and pocketsphinx-en-us) aligns the sentence's own words: a
JSGF grammar that is exactly the sentence, so the decoder can only place the
words, not choose them. Each keyword token becomes a 1 s clip: its aligned
segment with MARGIN_S either side, faded in and out over FADE_S, at a drawn
offset in a second of silence (training adds the noise). A keyword whose
segment is shorter than MIN_WORD_S is dropped (the aligner squeezed it).

Spot check: each cut is decoded again, alone, by pocketsphinx with a grammar
that is one of the ten keywords (a forced choice; chance is 1 in 10);
align.tsv records which it heard, and the summary line how often that is the
word the transcript says. A cut that lost its word, or holds mostly a
neighbour, is heard as another keyword more often.

Output (--out DIR), the Speech Commands layout training reads (--extra-data):
  DIR/<keyword>/<utt>_<i>.wav      the cuts, 16 kHz mono 16-bit
  DIR/validation_list.txt          the cuts of validation speakers
  DIR/testing_list.txt             empty
  DIR/align.tsv                    utt, speaker, split, word, start_s, end_s, heard
  DIR/SOURCES.txt
Never commit the audio.
"""

import argparse
import os
import sys

import numpy as np

from mega_kws_tools.audio import SR, read_wav, write_wav
from mega_kws_tools.data import speechocean as so
from mega_kws_tools.data.fetch_real_sc import decode_wav
from mega_kws_tools.data.layout import KEYWORDS

FRAME_S = 0.01  # pocketsphinx's frame rate
MARGIN_S = 0.04
FADE_S = 0.015
MIN_WORD_S = 0.08
MODEL_DIR = "/usr/share/pocketsphinx/model/en-us"


def decoder():
    from pocketsphinx import Decoder  # Debian's python3-pocketsphinx; only this tool needs it
    c = Decoder.default_config()
    c.set_string("-hmm", os.path.join(MODEL_DIR, "en-us"))
    c.set_string("-dict", os.path.join(MODEL_DIR, "cmudict-en-us.dict"))
    c.set_boolean("-remove_silence", False)  # frame numbers then count from the start of the audio
    c.set_string("-logfn", os.devnull)
    return Decoder(c)


def words_of(text: str) -> list:
    return [w.strip('.,!?;:"').lower() for w in text.split() if w.strip('.,!?;:"')]


def align(dec, words: list, x: np.ndarray) -> list:
    """[(word, start_s, end_s)] of the sentence's words in x, or [] when the
    dictionary lacks a word or the decoder finds no path."""
    if any(dec.lookup_word(w) is None for w in words):
        return []
    dec.set_jsgf_string("sentence", "#JSGF V1.0;\ngrammar sentence;\npublic <s> = " + " ".join(words) + " ;\n")
    dec.set_search("sentence")
    dec.start_utt()
    dec.process_raw(x.astype("<i2").tobytes(), False, True)
    dec.end_utt()
    if dec.hyp() is None:
        return []
    out = []
    for seg in dec.seg():
        w = seg.word.split("(")[0]  # 'to(2)': a pronunciation variant
        if not w.startswith("<") and not w.startswith("["):
            out.append((w, seg.start_frame * FRAME_S, (seg.end_frame + 1) * FRAME_S))
    return out if [w for w, _, _ in out] == words else []


def cut(rng, x: np.ndarray, start_s: float, end_s: float) -> np.ndarray:
    """The word's segment with margins and fades, at a drawn offset in 1 s of silence."""
    a = max(0, int((start_s - MARGIN_S) * SR))
    b = min(len(x), int((end_s + MARGIN_S) * SR), a + SR)
    w = x[a:b].astype(np.float64)
    f = min(int(FADE_S * SR), len(w) // 2)
    ramp = np.linspace(0.0, 1.0, f, endpoint=False)
    w[:f] *= ramp
    w[len(w) - f:] *= ramp[::-1]
    out = np.zeros(SR)
    off = int(rng.integers(0, SR - len(w) + 1))
    out[off:off + len(w)] = w
    return np.round(out).astype(np.int16)


def ear():
    """A decoder that can only hear one of the ten keywords (the spot check's forced choice)."""
    dec = decoder()
    dec.set_jsgf_string("keyword", "#JSGF V1.0;\ngrammar keyword;\npublic <k> = " + " | ".join(KEYWORDS) + " ;\n")
    dec.set_search("keyword")
    return dec


def heard(dec, clip: np.ndarray) -> str:
    """Which keyword `dec` (an ear()) hears in the clip, or ''."""
    dec.start_utt()
    dec.process_raw(clip.astype("<i2").tobytes(), False, True)
    dec.end_utt()
    h = dec.hyp()
    return h.hypstr if h is not None else ""


def speechocean(repo: str, rev: str, wanted=KEYWORDS, split=None):
    """(utt, speaker, split, samples, words) of the train/-half sentences that hold a
    word of `wanted` (a keyword), with speechocean.py's speaker split (only that split's
    speakers when `split` is given: the others' audio is not read); a test-half
    speaker is refused (speechocean.train_utterances)."""
    for utt, spk, path, text in so.train_utterances(repo, rev):
        words = words_of(text)
        if set(wanted) & set(words) and split in (None, so.speaker_split(spk)):
            yield utt, spk, so.speaker_split(spk), read_wav(so.git_show(repo, f"{rev}:{path}"), path), words


def cathy(repo: str, rev: str, wanted=KEYWORDS, split=None):
    """(utt, speaker, split, samples, words) of rhasspy/dataset-voice-cathy's
    prompts that hold a word of `wanted` (a keyword): one speaker, so all of them training
    (none when `split` names another)."""
    if split not in (None, "training"):
        return
    names = so.git_show(repo, f"{rev}:data").decode()  # `git show` of a tree lists it
    for name in sorted(n for n in names.splitlines() if n.endswith(".txt")):
        words = words_of(so.git_show(repo, f"{rev}:data/{name}").decode())
        if set(wanted) & set(words):
            utt = "cathy_" + name[:-4]
            yield utt, "cathy", "training", decode_wav(so.git_show(repo, f"{rev}:data/{name[:-4]}.wav")), words


SOURCES = {  # --source: (repository, commit, utterances, credit)
    "speechocean762": (so.REPO, so.COMMIT, speechocean,
                       "train/ half only (test/ never read); Zhang et al., Interspeech 2021; CC BY 4.0"),
    "cathy": ("rhasspy/dataset-voice-cathy", "c51cb971036a127359b43c621f26ca5081eab13e", cathy,
              "CMU ARCTIC prompts read by one speaker (Kathleen); CC0 1.0"),
}


def build(utterances, out: str, seed: int, credit: str) -> dict:
    """Aligns each utterance, cuts its keywords, writes the Speech Commands layout."""
    kws = set(KEYWORDS)
    aligner, listener = decoder(), ear()
    rng = np.random.default_rng(seed)
    for k in KEYWORDS:
        os.makedirs(os.path.join(out, k), exist_ok=True)
    rows, val, stats = [], [], {"sentences": 0, "unaligned": 0, "short": 0, "cuts": {}, "heard": 0}
    for utt, spk, split, x, words in utterances:
        stats["sentences"] += 1
        segs = align(aligner, words, x)
        if not segs:
            stats["unaligned"] += 1
            continue
        for i, (w, s, e) in enumerate(segs):
            if w not in kws:
                continue
            if e - s < MIN_WORD_S:
                stats["short"] += 1
                continue
            clip = cut(rng, x, s, e)
            name = f"{w}/{utt}_{i}.wav"
            write_wav(os.path.join(out, name), clip)
            h = heard(listener, clip)
            stats["heard"] += h == w
            stats["cuts"].setdefault(split, {}).setdefault(w, 0)
            stats["cuts"][split][w] += 1
            rows.append((utt, spk, split, w, f"{s:.2f}", f"{e:.2f}", h))
            if split == "validation":
                val.append(name)
    with open(os.path.join(out, "align.tsv"), "w") as f:
        f.write("utt\tspeaker\tsplit\tword\tstart_s\tend_s\theard\n")
        f.writelines("\t".join(r) + "\n" for r in rows)
    with open(os.path.join(out, "validation_list.txt"), "w") as f:
        f.writelines(v + "\n" for v in val)
    open(os.path.join(out, "testing_list.txt"), "w").close()
    with open(os.path.join(out, "SOURCES.txt"), "w") as f:
        f.write(f"{credit}; keywords cut by pocketsphinx forced alignment (mega_kws_tools.data.sentence_keywords)\n")
    stats["heard"] = f"{stats['heard']}/{len(rows)}"
    return stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", choices=sorted(SOURCES), default="speechocean762")
    ap.add_argument("--repo", required=True, help="the git directory fetched for github:<the source's repository>")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rev", help="commit to read (default: the one this project uses for the source)")
    ap.add_argument("--seed", type=int, default=763)
    args = ap.parse_args()
    try:
        import pocketsphinx  # noqa: F401
    except ImportError:
        ap.error("needs Debian's python3-pocketsphinx and pocketsphinx-en-us (apt-get install them)")
    repo_name, commit, utterances, credit = SOURCES[args.source]
    rev = args.rev or commit
    print(build(utterances(args.repo, rev), args.out, args.seed, f"{repo_name} {rev} {credit}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Real read speech from speechocean762 (Zhang et al. 2021, CC BY 4.0; free for
commercial and non-commercial use by its README): keyword-free sentences of
real speakers, for counting false alarms and as real negatives.

  speechocean.py --repo work/sources/jimbozhang+speechocean762/repo --out work/data/so762

Only the corpus's `train/` half is read (the utterances its train/wav.scp
lists); its `test/` half is kept outside the project for judging, like the
Speech Commands testing split, and is never opened: an utterance of a test
speaker, or a path not listed in train/wav.scp, is refused. The 125 training
speakers are split into this project's training and validation speakers by a
hash of the speaker id (VALIDATION_PERCENT of them validation), so the split
never changes when the corpus or this script does.

A sentence is keyword-free when none of its words is one of the ten keywords
or an exact homophone of one (KNOW sounds as "no", WRITE as "right": no
detector can tell those apart from the audio, so they are left out rather
than counted as false alarms). Near misses stay in (GOING, GOOD, NOT, NOW, OF,
ONE...): a detector must reject them.

Output (--out DIR):
  DIR/keyword_free/<split>/<utt>.wav   the keyword-free sentences, 16 kHz mono 16-bit
  DIR/keyword_free_validation.wav      the validation speakers' keyword-free sentences
                                       back to back, 0.3-1.5 s of quiet room-like noise
                                       between them (deterministic: --seed)
  DIR/keyword_free_validation.csv      its labels, the make_stream.py format: one
                                       keyword_free row per sentence and gap
  DIR/keyword_free_training.wav, .csv  the same of the training speakers (their own gap
                                       draws), where mine_hard.py looks for hard negatives
  DIR/clips/speech/<utt>_<k>.wav       1 s windows of the keyword-free sentences
                                       (WINDOWS per sentence, at drawn offsets where the
                                       window holds speech), a Speech Commands-layout
                                       folder that train.py --classes kws12 reads as
                                       _unknown_: real running speech to reject
  DIR/clips/validation_list.txt        the windows of validation speakers
  DIR/clips/testing_list.txt           empty
  DIR/speakers.txt                     speaker, split, sentences, keyword-free sentences
  DIR/SOURCES.txt                      repository, commit, credit
Never commit the audio.
"""

import argparse
import csv
import hashlib
import os
import subprocess
import sys

import numpy as np

from mega_kws_tools.audio import read_wav, write_wav
from mega_kws_tools.data.layout import KEYWORDS

SR = 16000
REPO = "jimbozhang/speechocean762"
COMMIT = "613968e3b0b789fc33936fb5eba1973176ba7d11"
VALIDATION_PERCENT = 40
HOMOPHONES = {"KNOW", "NOH", "WRITE", "RITE", "WRIGHT"}  # "no", "right"
GAP_S = (0.3, 1.5)
WINDOWS = {"training": 3, "validation": 1}  # 1 s windows cut per keyword-free sentence


def speaker_split(speaker: str) -> str:
    """'validation' or 'training' for a speechocean762 training-half speaker id (e.g. '0001')."""
    h = int(hashlib.sha1(f"speechocean762/{speaker}".encode()).hexdigest(), 16)
    return "validation" if h % 100 < VALIDATION_PERCENT else "training"


def is_keyword_free(text: str) -> bool:
    words = {w.strip(".,!?;:\"").upper() for w in text.split()}
    return not (words & {k.upper() for k in KEYWORDS}) and not (words & HOMOPHONES)


def git_show(repo: str, rev_path: str) -> bytes:
    return subprocess.run(["git", "-C", repo, "show", rev_path], check=True, capture_output=True).stdout


def table(repo: str, rev: str, name: str) -> dict:
    """A Kaldi-style two-column file of the train/ half as {key: value}."""
    out = {}
    for line in git_show(repo, f"{rev}:train/{name}").decode().splitlines():
        if line.strip():
            key, value = line.split(None, 1)
            out[key] = value.strip()
    return out


def quiet_noise(rng, n: int) -> np.ndarray:
    """Room-like noise between sentences: brown-ish noise at -60..-45 dBFS."""
    white = rng.standard_normal(n)
    brown = np.cumsum(white)
    brown -= np.convolve(brown, np.ones(801) / 801, mode="same")  # no drift
    brown /= np.sqrt(np.mean(brown ** 2)) + 1e-9
    level = 10 ** (rng.uniform(-60, -45) / 20)
    return np.round(brown * level * 32767).astype(np.int16)


def speech_windows(rng, x: np.ndarray, n: int) -> list:
    """Up to n one-second windows of a sentence at drawn offsets, each holding
    speech (its RMS at least a quarter of the sentence's loudest window's)."""
    if len(x) <= SR:
        return [np.pad(x, (0, SR - len(x)))]
    hop = SR // 10
    starts = np.arange(0, len(x) - SR + 1, hop)
    rms = np.array([np.sqrt(np.mean(x[s:s + SR].astype(np.float64) ** 2)) for s in starts])
    good = starts[rms >= 0.25 * rms.max()]
    picked = rng.choice(good, size=min(n, len(good)), replace=False)
    return [x[s:s + SR] for s in sorted(picked)]


def train_utterances(repo: str, rev: str):
    """(utt, speaker, path, text) of every utterance train/wav.scp lists, in order;
    one of a test-half speaker, or a path outside the train half's layout, is
    refused (SystemExit) before anything of it is read."""
    texts, scp, utt2spk = table(repo, rev, "text"), table(repo, rev, "wav.scp"), table(repo, rev, "utt2spk")
    test_speakers = {line.split()[1] for line in git_show(repo, f"{rev}:test/utt2spk").decode().splitlines()
                     if line.strip()}
    for utt in sorted(scp):
        spk, path = utt2spk[utt], scp[utt]
        if spk in test_speakers or not path.startswith("WAVE/SPEAKER") or "/test" in path.lower():
            raise SystemExit(f"refused: {utt} ({path}) belongs to speechocean762's test half")
        yield utt, spk, path, texts[utt]


def write_keyword_free(out: str, split: str, items: list, repo: str, rev: str, gap_rng, win_rng):
    """One split's keyword-free sentences: each as its own file and as 1 s windows
    under clips/speech/, and all of them back to back with quiet gaps between
    (keyword_free_<split>.wav and its labels). Returns the windows' names under
    clips/ and the stream's length in hours."""
    stream, rows, t, windows = [], [], 0, []
    for utt, path, text in items:
        x = read_wav(git_show(repo, f"{rev}:{path}"), path)
        write_wav(os.path.join(out, "keyword_free", split, utt + ".wav"), x)
        for k, w in enumerate(speech_windows(win_rng, x, WINDOWS[split])):
            name = f"speech/{utt}_{k}.wav"
            write_wav(os.path.join(out, "clips", name), w)
            windows.append(name)
        gap = quiet_noise(gap_rng, int(gap_rng.uniform(*GAP_S) * SR))
        for seg, detail, source in ((gap, "gap/quiet", ""), (x, "speech/read", f"speechocean762/{utt}: {text}")):
            rows.append(("keyword_free", f"{t / SR:.3f}", f"{(t + len(seg)) / SR:.3f}", "keyword_free", detail, source))
            stream.append(seg)
            t += len(seg)
    write_wav(os.path.join(out, f"keyword_free_{split}.wav"), np.concatenate(stream))
    with open(os.path.join(out, f"keyword_free_{split}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "onset_s", "offset_s", "label", "detail", "source"])
        w.writerows(rows)
    return windows, t / SR / 3600


def build(repo: str, out: str, rev: str, seed: int) -> dict:
    counts = {}
    free = {"training": [], "validation": []}
    for utt, spk, path, text in list(train_utterances(repo, rev)):  # all checked before any is written
        split = speaker_split(spk)
        c = counts.setdefault(spk, [split, 0, 0])
        c[1] += 1
        if is_keyword_free(text):
            c[2] += 1
            free[split].append((utt, path, text))
    for split in free:
        os.makedirs(os.path.join(out, "keyword_free", split), exist_ok=True)
    os.makedirs(os.path.join(out, "clips", "speech"), exist_ok=True)
    # the validation stream counts false alarms, the training one is where
    # mine_hard looks for running speech a model fires on; the window draws run
    # on through both splits (training first), the gaps are drawn per split
    gap_seeds = {"validation": seed, "training": seed + 2}
    win_rng = np.random.default_rng(seed + 1)
    windows, hours = {}, {}
    for split, items in free.items():
        windows[split], hours[split] = write_keyword_free(out, split, items, repo, rev,
                                                          np.random.default_rng(gap_seeds[split]), win_rng)
    with open(os.path.join(out, "clips", "validation_list.txt"), "w") as f:
        f.writelines(v + "\n" for v in windows["validation"])
    open(os.path.join(out, "clips", "testing_list.txt"), "w").close()
    with open(os.path.join(out, "speakers.txt"), "w") as f:
        f.write("speaker\tsplit\tsentences\tkeyword_free\n")
        for spk, (split, n, k) in sorted(counts.items()):
            f.write(f"{spk}\t{split}\t{n}\t{k}\n")
    with open(os.path.join(out, "SOURCES.txt"), "w") as f:
        f.write(f"{REPO} {rev} train/ half only (test/ never read)\n"
                "speechocean762: A non-native English corpus for pronunciation scoring task, "
                "Zhang et al., Interspeech 2021; CC BY 4.0\n")
    return {"speakers": {s: sum(1 for c in counts.values() if c[0] == s) for s in free},
            "keyword_free": {s: len(v) for s, v in free.items()}, "hours": hours}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="the git directory fetched for github:" + REPO)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rev", default=COMMIT, help="commit to read (default: the one this project uses)")
    ap.add_argument("--seed", type=int, default=762)
    args = ap.parse_args()
    summary = build(args.repo, args.out, args.rev, args.seed)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())

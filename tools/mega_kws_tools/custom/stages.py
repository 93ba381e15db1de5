# SPDX-License-Identifier: Apache-2.0
"""The stages of `python3 -m mega_kws_tools.custom`, each reading what the
ones before it wrote into the run's folder and writing its own result there
(atomically), so that a stopped run resumes at the stage it was in."""

import json
import os

import numpy as np

from mega_kws_tools.custom import examples as ex
from mega_kws_tools.custom import keywords as kw
from mega_kws_tools.custom import realdata as rd
from mega_kws_tools.custom import render as rn
from mega_kws_tools.data.sc10_audio import load_16k
from mega_kws_tools.data.sc10_recipe import COMMON, SC_OTHER
from mega_kws_tools.data.layout import KEYWORDS

SR = 16000


def save_npz(path: str, **arrays):
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def save_json(path: str, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(path + ".tmp", path)


# ----------------------------------------------------------------------------- words

def words_stage(run, progress):
    """The labels, their near misses, homophones and the other words to say."""
    rng = np.random.default_rng(run.seed)
    lexicon, common = kw.load_dictionary(), kw.common_words()
    near, homo = {}, {}
    for i, label in enumerate(run.labels):
        homo[label] = kw.homophones(label, lexicon) if len(label.split()) == 1 else []
        near[label] = [t for t in kw.near_misses(label, lexicon, rng, run.near, common) if t not in run.labels]
        progress(i + 1)
    said_like = set(run.labels) | {h for hs in homo.values() for h in hs}
    inside = {w for label in run.labels for w in label.split()}
    others = sorted({w for w in list(KEYWORDS) + list(SC_OTHER) + list(COMMON)
                     if w not in said_like and w not in inside and not any(w in n.split() for ns in near.values() for n in ns)})
    return {"labels": run.labels, "near": near, "homophones": homo, "others": others,
            "pronounced": {label: bool(kw.pronunciations(label, lexicon)) for label in run.labels}}


# ----------------------------------------------------------------------------- render

def render_jobs(run, words):
    """[(text, spk)] and the meta of each job: (kind, class, voice set)."""
    rng = np.random.default_rng([run.seed, 1])
    train = rn.training_voices()[: run.voices] if run.voices else rn.training_voices()
    jobs, meta = [], []

    def add(texts, voices, per_text, kind, cls, vset):
        new = rn.plan(texts, voices, per_text, rng, run.variants)
        jobs.extend(new)
        meta.extend([(kind, cls, vset)] * len(new))
    for k, label in enumerate(run.labels):
        add([label], train, run.renders, "keyword", k, "train")
        add([label], [("espeak-ng", rn.TUNE_VOICE)], run.held_out, "keyword", k, "tune")
        add([label], [("espeak-ng", rn.TEST_VOICE)], run.held_out, "keyword", k, "test")
        add(words["near"][label], train, 2, "near", run.unknown, "train")
    add(words["others"], train, 1, "other", run.unknown, "train")
    return jobs, meta


def render_stage(run, jobs, meta, progress):
    """jobs, meta: render_jobs'. Renders them; refuses a keyword with too few usable renderings."""
    ok, failed = rn.render_all(jobs, run.seed, run.threads, progress)
    too_long = {}
    for text, why in failed:
        too_long[text] = too_long.get(text, 0) + (why == "too long")
    for k, label in enumerate(run.labels):
        tried = sum(1 for (text, _), m in zip(jobs, meta) if m[0] == "keyword" and m[1] == k)
        got = sum(1 for i, _ in ok if meta[i][0] == "keyword" and meta[i][1] == k)
        if got < max(2, tried // 4):
            why = "too long for the model's 1-second window" if too_long.get(label, 0) > tried // 2 else "not renderable"
            raise kw.KeywordError(f"keyword '{label}': only {got} of {tried} renderings usable ({why})")
    audio = [x for _, x in ok]
    info = [list(meta[i]) + [jobs[i][0], jobs[i][1]["voice"]] for i, _ in ok]
    lengths = np.array([len(x) for x in audio], np.int64)
    return np.concatenate(audio) if audio else np.zeros(0, np.float32), lengths, info, failed


def load_recordings(folder: str, labels):
    """[(class, name, audio)] of the user's clips: with one keyword, every audio
    file in the folder; with several, the files in folder/<keyword>/."""
    out = []
    if not folder:
        return out
    for k, label in enumerate(labels):
        sub = folder if len(labels) == 1 else os.path.join(folder, label)
        if not os.path.isdir(sub):
            continue
        for name in sorted(os.listdir(sub)):
            path = os.path.join(sub, name)
            if os.path.isfile(path):
                x, why = rn.fit(load_16k(path), np.random.default_rng(0))
                if x is not None:
                    out.append((k, name, x))
        if not any(c == k for c, _, _ in out):
            raise kw.KeywordError(f"--recordings {sub}: no clip of '{label}' that could be read and fits 1 s")
    return out


# ----------------------------------------------------------------------------- speech

def speech_cache(run, fe, progress):
    """What the front end gives at every hop of the training speakers'
    keyword-free recording (cached per front end: it does not depend on the
    keyword) and each hop's end time."""
    paths = rd.speech_paths(run.data, "training")
    if paths is None:
        return None
    path = os.path.join(run.cache, "speech_training.npz")
    if not os.path.exists(path):
        speech = rd.load_speech(paths[0]).astype(np.float32) / 32768.0
        emb, ends = fe.speech_hops(speech, progress=progress)
        save_npz(path, emb=emb, ends=ends)
    z = np.load(path)
    return z["emb"], z["ends"]


def real_word_cache(run, fe, progress):
    """Embeddings of Speech Commands clips of training speakers (each placed
    once after a second of context), cached per backbone; [] without them."""
    path = os.path.join(run.cache, "real_words.npz")
    if not os.path.exists(path):
        rng = np.random.default_rng(7)
        clips = rd.real_words(run.data, set(), 4000, rng)
        if not clips:
            return [], fe.embed_last(np.zeros((0, 2 * SR), np.float32))
        audio = np.stack([ex.place(load_16k(p), rng, None, []) for _, p in clips])
        emb = fe.embed_last(audio, progress=lambda d: progress(d / len(audio)))
        save_npz(path, emb=emb, words=np.array([w for w, _ in clips]))
    z = np.load(path)
    return list(z["words"]), z["emb"]

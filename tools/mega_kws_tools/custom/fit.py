# SPDX-License-Identifier: Apache-2.0
"""Embedding the examples, training the head, tuning the defaults: the middle
stages of the custom-keyword command (see stages.py)."""

import numpy as np

from mega_kws_tools.custom import examples as ex
from mega_kws_tools.custom import head as hd
from mega_kws_tools.custom import realdata as rd

RECORDING_BOOST = 8.0   # a user's own clip counts as this many rendered ones
MAX_SPEECH_HOPS = 12000  # real speech windows kept as negatives


HOLD_OUT_FROM = 8  # with this many recordings of a keyword or more, every fourth only tunes


def recording_clips(recordings):
    """The user's clips as render rows: "recording" ones train; with
    HOLD_OUT_FROM or more of a keyword, every fourth is "recording-tune",
    kept out of training to tune the defaults on real speech it never heard."""
    out, seen = [], {}
    for k, name, x in recordings:
        seen[k] = seen.get(k, 0) + 1
    index = {}
    for k, name, x in recordings:
        index[k] = index.get(k, 0) + 1
        held = seen[k] >= HOLD_OUT_FROM and index[k] % 4 == 0
        out.append((["keyword", k, "recording-tune" if held else "recording", name, "recording"], x))
    return out


def split_renders(audio, lengths, info):
    """[(info row, clip)] from the render stage's concatenated audio."""
    ends = np.cumsum(lengths)
    return [(row, audio[e - n:e]) for row, n, e in zip(info, lengths, ends)]


def speech_parts(run, hop_ends, cut):
    """Masks over the training speakers' hops: (negatives, tuning), split by time."""
    keep = rd.hop_mask(hop_ends, cut)
    first = hop_ends <= hop_ends[-1] * rd.TRAIN_SHARE
    return keep & first, keep & ~first


def context_audio(run, cut):
    """The first share of the training speakers' recording, with the stretches
    that say a keyword silenced: context for the examples (None without it)."""
    paths = rd.speech_paths(run.data, "training")
    if paths is None:
        return None
    speech = rd.load_speech(paths[0])
    speech = speech[: int(len(speech) * rd.TRAIN_SHARE)].astype(np.float32) / 32768.0
    for a, b in cut:
        speech[max(0, int(a * ex.SR)):max(0, int(b * ex.SR))] = 0.0
    return speech


def examples_of(run, clips, n_classes, speech, rng, progress):
    """Embeddings, classes and draw boosts of the rendered and recorded words
    (each placed run.copies times) and of non-speech stretches."""
    by_class, boost_of = {}, {}
    for row, x in clips:
        cls, vset = row[1], row[2]
        if vset in ("train", "recording"):
            copies = run.copies * (2 if vset == "recording" else 1)
            by_class.setdefault(cls, []).extend([x] * copies)
            boost_of.setdefault(cls, []).extend([RECORDING_BOOST if vset == "recording" else 1.0] * copies)
    audio, y = ex.build({c: ws for c, ws in by_class.items()}, 1, rng, speech, run.non_speech, run.silence)
    boost = np.concatenate([np.array(boost_of[c]) for c in by_class] + [np.ones(run.non_speech)])
    emb = run.fe.embed_last(audio, progress=lambda d: progress(d / max(1, len(audio))))
    return emb, y, boost


def tuning_sequences(run, clips, rng, speech):
    """Hop embeddings (M, hops, D) of the tuning voice's keywords and of the
    user's recordings, each at the end of three seconds (two of context), and
    their classes. With recordings, the smoothing is chosen for real speech
    too: a voice synthesizer's words stay above a threshold for more hops than
    people's do."""
    seqs, cls = [], []
    for row, x in clips:
        if row[2] in TUNE_SOURCES:
            seqs.append(ex.place(x, rng, speech, [], seconds=3))
            cls.append(row[1] + TUNE_SOURCES[row[2]])
    audio = np.stack(seqs) if seqs else np.zeros((0, 3 * ex.SR), np.float32)
    return run.fe.hop_embeddings(audio), np.array(cls, np.int64)


# added to a tuning sequence's class: which source it comes from
TUNE_SOURCES = {"tune": 0, "recording": 1000, "recording-tune": 2000}


def embed_stage(run, words, renders, speech_hops_, real_words_, progress):
    """Everything the head trains and tunes on, as embeddings."""
    rng = np.random.default_rng([run.seed, 2])
    clips = split_renders(*renders)
    clips += recording_clips(run.recordings_list())
    cut = []
    paths = rd.speech_paths(run.data, "training")
    if paths is not None:
        spoken, _ = rd.sentences(paths[1])
        cut = rd.excluded(spoken, run.said_like(words))
    speech = context_audio(run, cut)
    emb, y, boost = examples_of(run, clips, run.n_classes, speech, rng, progress)
    parts = {"emb": emb, "y": y, "boost": boost}
    if speech_hops_ is not None:
        hops, ends = speech_hops_
        neg, tune = speech_parts(run, ends, cut)
        idx = np.nonzero(neg)[0]
        if len(idx) > MAX_SPEECH_HOPS:
            idx = np.sort(rng.choice(idx, MAX_SPEECH_HOPS, replace=False))
        parts = _append(parts, hops[idx], run.unknown)
        parts["free"], parts["free_piece"] = hops[tune], _pieces(np.nonzero(tune)[0])
    words_, wemb = real_words_
    if len(words_):
        keep = np.array([w not in run.said_like(words) for w in words_])
        parts = _append(parts, wemb[keep], run.unknown)
    parts["tune_seq"], parts["tune_cls"] = tuning_sequences(run, clips, rng, speech)
    return parts


def _append(parts, emb, cls):
    parts = dict(parts)
    parts["emb"] = np.concatenate([parts["emb"], emb.astype(parts["emb"].dtype)])
    parts["y"] = np.concatenate([parts["y"], np.full(len(emb), cls, np.int64)])
    parts["boost"] = np.concatenate([parts["boost"], np.ones(len(emb))])
    return parts


def _pieces(idx):
    """A piece number per index: a new piece wherever the indices jump."""
    return np.concatenate([[0], np.cumsum(np.diff(idx) != 1)]) if len(idx) else np.zeros(0, np.int64)


def train_stage(run, parts, progress):
    model = run.fe.new_model(run.n_classes)
    w = hd.balanced_weights(parts["y"], run.n_classes, parts["boost"])
    return run.fe.train(model, parts["emb"], parts["y"], w, run.steps, run.seed, progress)


def tune_stage(run, model, parts, hop_s):
    """The detection defaults, and the tuning figures per keyword."""
    # per keyword: held-out recordings alone when there are any (real speech the head never
    # heard); else the tuning voice's sequences and the recordings', each source weighing the same
    def source(k, name):
        code = k + TUNE_SOURCES[name]
        return [run.fe.posteriors(model, s) for s, c in zip(parts["tune_seq"], parts["tune_cls"]) if c == code]
    seq_probs = {}
    for k in range(len(run.labels)):
        held = source(k, "recording-tune")
        seq_probs[k] = [held] if held else [source(k, "tune"), source(k, "recording")]
    free = parts.get("free")
    pieces, hours = [], 0.0
    if free is not None and len(free):
        probs = run.fe.posteriors(model, free)
        piece = parts["free_piece"]
        pieces = [probs[piece == p] for p in np.unique(piece)]
        hours = len(free) * hop_s / 3600.0
    smoothing, ths, figs = hd.tune(seq_probs, pieces, hours, list(range(len(run.labels))), hop_s,
                                   run.fe.window_chunks, run.max_fa_per_hour)
    thresholds = [float(ths.get(k, 1.0)) for k in range(run.n_classes)]
    return {"thresholds": thresholds, "smoothing_hops": smoothing, "refractory_ms": hd.REFRACTORY_MS}, figs, hours

# SPDX-License-Identifier: Apache-2.0
"""Training examples for a custom keyword, as the frozen backbone sees them.

The new model keeps the bundled model's front end and encoder layers as they
are and learns a new head on the window embedding they produce (the encoder's
output averaged over the last window, what the head reads in the runtime).
So every example is embedded once: a word placed in the last second of a
two-second stretch whose first second is context (real speech, another word,
noise or silence), the whole augmented (level, noise, a room, speed, pitch,
formants), exactly as a streaming session would hear it.
"""

import numpy as np
import torch

from mega_kws_tools.augment.nonspeech import random_nonspeech
from mega_kws_tools.augment.speaker import change_speed, recolor, shift_pitch
from mega_kws_tools.data.sc10_audio import colored_noise, reverb, rms, trim

SR = 16000
BATCH = 64
PIECE_S = 20  # speech_hops' pieces


def hop_embeddings(model, audio: torch.Tensor) -> torch.Tensor:
    """(B, hops, D): after each chunk of each sequence, the encoder's output
    averaged over the last window (fewer chunks at the start): what a streaming
    session's head reads at each hop. audio: (B, T), T a whole number of chunks."""
    cfg = model.cfg
    with torch.no_grad():
        feats = model.features(audio)
    b = feats.shape[0]
    sums = feats.reshape(b, -1, cfg.chunk_size, cfg.embed_dim).sum(dim=2)
    csum = torch.cumsum(sums, dim=1)
    hops = sums.shape[1]
    lo = torch.clamp(torch.arange(hops) - cfg.window_chunks, min=-1)
    prev = torch.where((lo >= 0)[None, :, None], csum[:, lo.clamp(min=0)], torch.zeros_like(csum))
    count = (torch.arange(hops) - lo).to(feats.dtype) * cfg.chunk_size
    return (csum - prev) / count[None, :, None]


def embed_last(model, examples: np.ndarray, progress=None) -> np.ndarray:
    """(N, D) float32: each example's embedding at its last hop."""
    out = []
    for i in range(0, len(examples), BATCH):
        x = torch.from_numpy(examples[i:i + BATCH])
        out.append(_last(model, x))
        if progress:
            progress(min(len(examples), i + BATCH))
    return np.concatenate(out) if out else np.zeros((0, model.cfg.embed_dim), np.float32)


def _last(model, x):
    with torch.no_grad():
        return model.window_embedding(x).numpy().astype(np.float32)


def speaker_augment(word: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Speed, pitch and formants of a rendered word, each at random, a new speaker."""
    if rng.random() < 0.5:
        word = trim(change_speed(np.pad(word, (2000, 2000)), float(rng.uniform(0.9, 1.1))))
    if rng.random() < 0.3:
        word = shift_pitch(word, float(rng.uniform(0.8, 1.4)))
    if rng.random() < 0.3:
        word = recolor(word, float(rng.uniform(0.88, 1.15)), float(rng.uniform(-3, 3)))
    return word.astype(np.float32)


def context(rng: np.random.Generator, n: int, speech, words) -> np.ndarray:
    """The second before a word: real speech (when there is any), another
    rendered word, noise, or near silence."""
    u = rng.random()
    if speech is not None and u < 0.45:
        a = int(rng.integers(0, len(speech) - n))
        return speech[a:a + n].copy()
    if words and u < 0.7:
        w = words[int(rng.integers(len(words)))][:n]
        out = np.zeros(n, np.float32)
        a = int(rng.integers(0, n - len(w) + 1))
        out[a:a + len(w)] = w * np.float32(rng.uniform(0.3, 1.0))
        return out
    return colored_noise(rng, n, str(rng.choice(["white", "pink", "brown"]))) * np.float32(10 ** rng.uniform(-4, -1.5))


def place(word: np.ndarray, rng: np.random.Generator, speech, words, seconds: int = 2) -> np.ndarray:
    """A `seconds`-long stretch ending with a second that holds `word` at a random
    place, the rest context; level, noise and a room drawn at random."""
    n = seconds * SR
    x = np.concatenate([context(rng, n - SR, speech, words), np.zeros(SR, np.float32)])
    word = word[:SR]
    scale = 10 ** (rng.uniform(-26, -8) / 20) / max(rms(word), 1e-6)
    a = n - SR + int(rng.integers(0, SR - len(word) + 1))
    x[a:a + len(word)] += word * np.float32(scale)
    if rng.random() < 0.3:
        x, _ = reverb(rng, x)
    if rng.random() < 0.6:
        noise = colored_noise(rng, n, str(rng.choice(["white", "pink", "brown"])))
        x = x + noise * np.float32(rms(x[n - SR:]) * 10 ** (-rng.uniform(5, 35) / 20))
    return np.clip(x, -1, 1).astype(np.float32)


def non_speech(rng: np.random.Generator, seconds: int = 2) -> np.ndarray:
    """Silence, or a sound that is not speech (tones, beeps, chirps, square and
    saw waves, coloured noise, notes: augment/nonspeech.py): what must not fire."""
    if rng.random() < 0.15:
        return (colored_noise(rng, seconds * SR, "white") * 10 ** rng.uniform(-5, -3.5)).astype(np.float32)
    return random_nonspeech(seconds * SR, rng).astype(np.float32)


def build(words_by_class, copies: int, rng: np.random.Generator, speech, n_non_speech: int, silence_class: int):
    """(audio (N, 2 s), class (N,)): each word of each class placed `copies` times
    with fresh context and augmentation, plus non-speech stretches."""
    pool = [w for ws in words_by_class.values() for w in ws]
    xs, ys = [], []
    for cls, words in words_by_class.items():
        for w in words:
            for _ in range(copies):
                xs.append(place(speaker_augment(w, rng), rng, speech, pool))
                ys.append(cls)
    for _ in range(n_non_speech):
        xs.append(non_speech(rng))
        ys.append(silence_class)
    return np.stack(xs) if xs else np.zeros((0, 2 * SR), np.float32), np.array(ys, np.int64)


def speech_hops(model, speech: np.ndarray, piece_s: int = PIECE_S, progress=None) -> np.ndarray:
    """(hops, D) embeddings of every hop of a long keyword-free recording, in
    pieces of `piece_s` seconds each heard after the second before it (the
    embeddings of that second are dropped): the EMA's memory of older audio is
    negligible by then."""
    cs = model.cfg.chunk_samples
    piece, ctx = piece_s * SR // cs * cs, SR // cs * cs
    starts = list(range(ctx, len(speech) - piece + 1, piece))
    out = []
    for i in range(0, len(starts), 8):
        batch = np.stack([speech[a - ctx:a + piece] for a in starts[i:i + 8]])
        e = hop_embeddings(model, torch.from_numpy(batch))[:, ctx // cs:]
        out.append(e.reshape(-1, e.shape[-1]).numpy().astype(np.float32))
        if progress:
            progress(min(len(starts), i + 8) / max(1, len(starts)))
    return np.concatenate(out) if out else np.zeros((0, model.cfg.embed_dim), np.float32)

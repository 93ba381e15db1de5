# SPDX-License-Identifier: Apache-2.0
"""compare.py's teacher: a head (the teacher classifier's shape, 16 embedding
steps) on the pretrained teacher's frozen embedding (work/teacher, fetched by
mega_kws_tools.teacher.fetch), trained on the same examples as the Mega head,
and its scores on clips and on a long recording."""

import os

import numpy as np
import torch
import torch.nn.functional as F

from mega_kws_tools.custom.head import balanced_weights
from mega_kws_tools.custom.paths import ROOT
from mega_kws_tools.teacher import features
from mega_kws_tools.teacher.embed_cache import N_STEPS, StepEmbedder
from mega_kws_tools.teacher.head import Head

SR = 16000
PIECE = 40 * SR  # the recording in pieces, each after 2 s of the audio before it
STRIDE = 3       # a window every 3 embedding steps: 240 ms, about the Mega model's hop


def embedder():
    return StepEmbedder(features.Teacher(*features.load_graphs(os.path.join(ROOT, "work", "teacher"))))


def last_steps(emb, audio):
    """(N, 16, 96) of 2-second examples (float audio in [-1, 1])."""
    with torch.no_grad():
        return torch.cat([emb(torch.from_numpy(audio[i:i + 32] * 32768.0))[:, -N_STEPS:]
                          for i in range(0, len(audio), 32)]).numpy()


def train(x, y, rng, steps=3000):
    head = Head(3)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3, weight_decay=1e-2)
    w = balanced_weights(y, 3)
    xt, yt = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)
    head.train()
    for _ in range(steps):
        idx = rng.choice(len(y), 256, p=w / w.sum())
        loss = F.cross_entropy(head(xt[idx]), yt[idx], label_smoothing=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return head.eval()


def prob(head, x):
    with torch.no_grad():
        return torch.softmax(head(torch.from_numpy(x.astype(np.float32))), -1)[:, 0].numpy()


def scores(audio, y, clips, speech, rng):
    """(P[clip, window], Q[window]): label 0's probability for 2-second windows of
    each clip ending every 0.25 s from 2 s on, and for windows of the recording
    every STRIDE steps."""
    emb = embedder()
    head = train(last_steps(emb, audio), y, rng)
    p = np.stack([prob(head, last_steps(emb, clips[:, end - 2 * SR:end]))
                  for end in range(2 * SR, clips.shape[1] + 1, SR // 4)], 1)
    q = []
    with torch.no_grad():
        for a in range(0, len(speech) - PIECE - 2 * SR + 1, PIECE):
            e = emb(torch.from_numpy(speech[a:a + PIECE + 2 * SR][None] * 32768.0))[0].numpy()
            first = len(e) - PIECE // 1280  # the steps of the piece itself (1280 samples a step)
            q.append(prob(head, np.stack([e[i - N_STEPS:i] for i in range(max(first, N_STEPS), len(e), STRIDE)])))
    return p, np.concatenate(q)

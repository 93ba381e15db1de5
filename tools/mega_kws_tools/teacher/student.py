# SPDX-License-Identifier: Apache-2.0
"""Candidate (b) of issue 83 item 4: the teacher's melspectrogram and speech
embedding as the model's own front end, Mega-chunk layers on top, in PyTorch.

The model (EmbeddingStudent) is MegaKWS with its patch embedding replaced: the
teacher's embeddings [B, T, 96] (one per 80 ms step, frozen, given as input:
stream_embed) are standardized (the training set's mean and deviation, fixed
buffers) and projected to the Mega width; unidirectional Mega-chunk encoder
layers (model.layers), a chunk being a few steps (3: 240 ms, the hop); the
final norm; the mean over the last W chunks; MegaKWS's classifier; the 12
labels of models/sc10-demo.mega (head.LABELS).

Its reach is bounded: each layer's EMA has `truncation` taps and its
attention stays inside a chunk, so the posteriors after a hop depend only on
the last receptive_steps(cfg) steps. stream_posteriors runs a whole
recording's embeddings in blocks, each with that much context before it, and
equals window_posteriors (the offline model on the window of steps ending at
each hop) to rounding; a runtime stream needs that many steps of state.

Training (train): cached clips (embed_cache's [N, 16, 96]: the clip's steps
end at step 16; the steps before the clip hold the embedding of digital
silence, so extending to the left by repeating step 0 is exactly more
silence) cut to the model's window, optionally shifted left a few steps, and
with a share of them given another clip's steps (a non-keyword, e.g. running
speech or noise) in place of the silence before the word, since a stream has
audio there. That is not enough: each clip's early steps still read the digital
silence before it, which a stream never has, and a model given streams of
running speech as negatives (Negatives) learns "a stream is _unknown_" and
misses the keywords of the validation recordings. Windows of a recording of
training speakers (labelled_windows: make_stream's realtrain60, labelled by
the word that ends in each) put real keywords in stream context. The
schedule and the checkpoint choice are head.train's (head.fit).
"""

import numpy as np
import torch
import torch.nn as nn

from mega_kws_tools.model import MegaConfig, MegaKWS
from mega_kws_tools.teacher import head

N_EMBEDDING = 96
CLIP_STEPS = 13  # steps of a cached clip whose window reaches the clip (its steps 3-15; 0-2 are silence)
DEFAULTS = dict(embed_dim=64, hidden_dim=128, ffn_hidden_dim=128, z_dim=32, n_dim=16, n_layers=2, chunk_size=3,
                truncation=6, window_chunks=4, classifier_dim=128, norm_type="layernorm")


def student_config(**options) -> MegaConfig:
    """A MegaConfig for the student: tokens are embedding steps (patch kernel and stride 1), 12 labels."""
    cfg = dict(DEFAULTS, **options)
    return MegaConfig(patch_kernel=1, patch_stride=1, n_classes=len(head.LABELS), **cfg)


def receptive_span(cfg: MegaConfig) -> int:
    """The steps the posteriors after a hop depend on, counted back from the hop's end. A layer's output
    over steps [a, end) reads its input over [chunk_start(a) - truncation + 1, end): the EMA's taps, and
    the attention's keys and values over whole chunks."""
    if cfg.truncation <= 0:
        raise ValueError("an untruncated EMA reaches back to the stream's start: give truncation > 0")
    c = cfg.chunk_size
    first = 0  # the first pooled step, counted from the window's first pooled chunk
    for _ in range(cfg.n_layers):
        first = (first // c) * c - (cfg.truncation - 1)
    return cfg.window_chunks * c - first


def receptive_steps(cfg: MegaConfig) -> int:
    """receptive_span in whole chunks: the offline model's window, and the steps a stream keeps."""
    c = cfg.chunk_size
    return -(-receptive_span(cfg) // c) * c


class StepProjection(nn.Module):
    """Embeddings [B, T, 96] -> tokens [B, T, D]: standardized by fixed statistics, then a linear map
    (the two fold into one matrix for a runtime)."""

    def __init__(self, n_in: int, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(n_in))
        self.register_buffer("std", torch.ones(n_in))
        self.proj = nn.Linear(n_in, dim)

    def set_statistics(self, x: np.ndarray):
        flat = x.reshape(-1, x.shape[-1])
        self.mean.copy_(torch.from_numpy(flat.mean(axis=0)))
        self.std.copy_(torch.from_numpy(flat.std(axis=0) + 1e-3))

    def forward(self, x):
        return self.proj((x - self.mean) / self.std)


class EmbeddingStudent(MegaKWS):
    """Embeddings [B, T, 96] (T a whole number of chunks) -> logits [B, 12]; MegaKWS's layers,
    pooling and classifier."""

    def __init__(self, cfg: MegaConfig, n_in: int = N_EMBEDDING):
        if cfg.bidirectional:
            raise ValueError("a streaming student is unidirectional")
        super().__init__(cfg)
        self.embed_tokens = StepProjection(n_in, cfg.embed_dim)

    def forward(self, x, trace=None):
        return self.window_logits(x)  # the mean over the last W chunks, as a stream reads it

    def hop_logits(self, x):
        """[B, T, 96] -> [B, T / chunk, 12]: after each chunk, the logits over the last W chunks
        (fewer at the start), as MegaKWS.chunk_window_logits pools them, for a batch."""
        cfg = self.cfg
        feats = self.features(x)
        b, t, d = feats.shape
        sums = feats.reshape(b, t // cfg.chunk_size, cfg.chunk_size, d).sum(dim=2)
        total = torch.cumsum(sums, dim=1)
        ahead = torch.cat([torch.zeros_like(total[:, :cfg.window_chunks]), total], dim=1)[:, :total.shape[1]]
        n = torch.clamp(torch.arange(1, total.shape[1] + 1, device=x.device), max=cfg.window_chunks)
        return self.head((total - ahead) / (n * cfg.chunk_size).to(feats.dtype)[None, :, None])


def stream_posteriors(model: EmbeddingStudent, emb: np.ndarray, block_hops: int = 2048) -> np.ndarray:
    """A recording's embeddings [K, 96] -> posteriors [K // chunk, 12], one per hop, the last W chunks
    pooled; in blocks of hops, each with receptive_steps of context (bounded memory and state)."""
    cfg = model.cfg
    c, reach = cfg.chunk_size, receptive_steps(cfg)
    n_hops = len(emb) // c
    out = []
    model.eval()
    with torch.no_grad():
        for j0 in range(0, n_hops, block_hops):
            j1 = min(n_hops, j0 + block_hops)
            s0 = max(0, (j0 + 1) * c - reach)
            logits = model.hop_logits(torch.from_numpy(np.ascontiguousarray(emb[s0:j1 * c]))[None])[0]
            out.append(torch.softmax(logits[j0 - s0 // c:].double(), dim=1).numpy())
    return np.concatenate(out) if out else np.zeros((0, len(head.LABELS)))


def window_posteriors(model: EmbeddingStudent, emb: np.ndarray, hop: int) -> np.ndarray:
    """The offline model on the window of steps ending at hop `hop` (receptive_steps of them, fewer at
    the recording's start): what stream_posteriors gives at that hop."""
    c, reach = model.cfg.chunk_size, receptive_steps(model.cfg)
    end = (hop + 1) * c
    x = torch.from_numpy(np.ascontiguousarray(emb[max(0, end - reach):end]))[None]
    model.eval()
    with torch.no_grad():
        return torch.softmax(model(x).double(), dim=1)[0].numpy()


def extend(x: np.ndarray, n: int) -> np.ndarray:
    """Cached clips [N, 16, 96] -> [N, n, 96] ending where they end: the last n steps, with step 0 (the
    embedding of the silence before the clip) repeated in front where n > 16."""
    if n <= x.shape[1]:
        return x[:, x.shape[1] - n:]
    return np.concatenate([np.repeat(x[:, :1], n - x.shape[1], axis=1), x], axis=1)


class Negatives:
    """Windows of keyword-free streams (training speakers' running speech, stream_embed recordings), each
    `reach` steps ending anywhere, half of them (where given) ending at `hard` steps: the ends of the
    hops a model took for a keyword (mine), as the bundled model's hard examples are chosen."""

    def __init__(self, emb, reach, hard=None):
        self.emb, self.reach = emb, reach
        self.hard = np.asarray(hard if hard is not None else [], dtype=np.int64)

    def draw(self, n, rng):
        ends = rng.integers(self.reach, len(self.emb) + 1, size=n)
        if len(self.hard):
            pick = rng.random(n) < 0.5
            ends[pick] = self.hard[rng.integers(len(self.hard), size=int(pick.sum()))]
        return np.stack([self.emb[e - self.reach:e] for e in ends])


def labelled_windows(emb, rows, reach, chunk, after_s=(0.0, 0.48), clear_s=2.0, step_end=None):
    """Windows of a recording of training speakers (stream_embed) with its labels: (x [M, reach, 96], y [M]).
    rows: [(kind, onset_s, offset_s, label)] (make_stream's CSV). A word (keyword, or another word as
    _unknown_) gives the windows ending at the hops whose last step's audio ends after_s after the word's
    end; a hop with no keyword in the clear_s before its end gives an _unknown_ window (every other hop).
    step_end(k): the time step k's audio ends (stream_embed: (1280 k + 12512) / 16000)."""
    step_end = step_end or (lambda k: (1280 * k + 12512) / 16000)
    unknown = head.LABELS.index(head.UNKNOWN)
    hop_ends = np.arange(reach, len(emb) + 1, chunk)
    t = np.array([step_end(e - 1) for e in hop_ends])
    ends, labels = [], []
    for kind, _, off, label in rows:
        if kind in ("keyword", "unknown"):
            near = hop_ends[(t >= off + after_s[0]) & (t <= off + after_s[1])]
            ends += list(near)
            labels += [head.LABELS.index(label) if kind == "keyword" else unknown] * len(near)
    keyword_ends = np.sort([off for kind, _, off, _ in rows if kind == "keyword"])
    for h in range(0, len(hop_ends), 2):
        i = np.searchsorted(keyword_ends, t[h] - clear_s)
        if i == len(keyword_ends) or keyword_ends[i] > t[h] + 1.0:  # no keyword ends near this hop
            ends.append(hop_ends[h])
            labels.append(unknown)
    x = np.stack([emb[e - reach:e] for e in ends]) if ends else np.zeros((0, reach, emb.shape[1]), emb.dtype)
    return x, np.array(labels, dtype=np.int64)


def mine(model, emb, threshold=0.3):
    """The end steps of the hops of a keyword-free stream where `model` gives a keyword >= threshold."""
    p = stream_posteriors(model, emb)
    keyword = [i for i, l in enumerate(head.LABELS) if not l.startswith("_")]
    return (np.nonzero(p[:, keyword].max(axis=1) >= threshold)[0] + 1) * model.cfg.chunk_size


class Batches:
    """Training windows [B, reach, 96] drawn class-balanced (head.balanced_draw) from extended clips:
    each shifted left by 0..max_shift steps, and with probability context_share the silence before the
    word replaced by the steps of a drawn non-keyword clip (running speech, noise, another word); with
    `negatives` (Negatives), that share of each batch its windows, labelled _unknown_."""

    def __init__(self, x, y, reach, max_shift=2, context_share=0.5, unknown_share=0.0, seed=0, negatives=None,
                 negative_share=0.0, windows=None, window_share=0.0):
        self.ext = extend(x, reach + max_shift)
        self.y, self.reach, self.max_shift = y, reach, max_shift
        self.context_share, self.unknown_share = context_share, unknown_share
        self.negatives, self.negative_share = negatives, negative_share if negatives is not None else 0.0
        self.windows, self.window_share = windows, window_share if windows is not None else 0.0
        self.others = np.nonzero(np.array([head.LABELS[i].startswith("_") for i in y]))[0]
        self.rng = np.random.default_rng(seed)

    def draw(self, batch):
        n_neg = int(round(batch * self.negative_share))
        n_win = int(round(batch * self.window_share))
        i = head.balanced_draw(self.y, len(head.LABELS), self.rng, batch - n_neg - n_win, self.unknown_share)
        x = self.ext[i].copy()
        n_before = x.shape[1] - CLIP_STEPS
        swap = self.rng.random(len(i)) < self.context_share
        if swap.any() and len(self.others) and n_before > 0:
            donors = self.others[self.rng.integers(len(self.others), size=int(swap.sum()))]
            x[swap, :n_before] = self.ext[donors, -n_before:]
        shift = self.rng.integers(self.max_shift + 1, size=len(i))
        rows = [x[b, x.shape[1] - self.reach - s:x.shape[1] - s] for b, s in enumerate(shift)]
        labels = self.y[i]
        if n_neg:
            rows += list(self.negatives.draw(n_neg, self.rng))
            labels = np.concatenate([labels, np.full(n_neg, head.LABELS.index(head.UNKNOWN), np.int64)])
        if n_win:
            w = head.balanced_draw(self.windows[1], len(head.LABELS), self.rng, n_win)
            rows += list(self.windows[0][w])
            labels = np.concatenate([labels, self.windows[1][w]])
        return torch.from_numpy(np.stack(rows)), torch.from_numpy(labels)


def train(x, y, val_x, val_y, out, cfg, steps=3000, batch=128, lr=2e-3, weight_decay=1e-2, seed=83,
          eval_every=100, max_shift=2, context_share=0.5, unknown_share=0.0, negative_stream=None, hard_ends=None,
          negative_share=0.0, window_streams=(), window_share=0.0, log=print):
    """Trains an EmbeddingStudent on cached clips (and, with negative_stream [K, 96], negative_share of
    each batch its windows, half of them ending at hard_ends where given: Negatives); writes
    out/best.pt (the best validation key, as head.train keeps it) and out/history.json. Returns the
    best checkpoint's dict."""
    torch.manual_seed(seed)
    model = EmbeddingStudent(cfg)
    model.embed_tokens.set_statistics(x)
    reach = receptive_steps(cfg)
    negatives = None
    if negative_stream is not None:
        hard = None if hard_ends is None else [e for e in hard_ends if reach <= e <= len(negative_stream)]
        negatives = Negatives(negative_stream, reach, hard)
    windows = None
    if window_streams:  # [(embeddings, label rows)]
        parts = [labelled_windows(e, rows, reach, cfg.chunk_size) for e, rows in window_streams]
        windows = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        log(f"{len(windows[1])} labelled stream windows: {np.bincount(windows[1], minlength=len(head.LABELS)).tolist()}")
    batches = Batches(x, y, reach, max_shift, context_share, unknown_share, seed, negatives, negative_share,
                      windows, window_share)
    vx = extend(val_x, reach)
    return head.fit(model, lambda: batches.draw(batch), lambda: head.predict(model, vx, 256), val_y, out, steps, lr,
                    weight_decay, eval_every, log, lambda: {
                        "labels": head.LABELS, "mega_config": vars(cfg),
                        "train": {"steps": steps, "batch": batch, "lr": lr, "seed": seed, "max_shift": max_shift,
                                  "context_share": context_share, "unknown_share": unknown_share,
                                  "negative_share": negative_share if negatives is not None else 0.0,
                                  "window_share": window_share if windows is not None else 0.0}})


def load_student(path):
    """(model in eval mode, checkpoint dict) of a student's best.pt."""
    ck = torch.load(path, map_location="cpu", weights_only=False)
    model = EmbeddingStudent(MegaConfig(**ck["mega_config"]))
    model.load_state_dict(ck["state"])
    return model.eval(), ck


def clip_logits(model, x, batch=256):
    """Logits of cached clips [N, 16, 96], each the model's window ending at the clip's end."""
    return head.predict(model, extend(x, receptive_steps(model.cfg)), batch)


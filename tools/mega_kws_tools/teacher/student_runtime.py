# SPDX-License-Identifier: Apache-2.0
"""What the runtime computes for a TeacherEmbedding model file (a student,
teacher.student, converted by student_convert), in PyTorch: the reference its
self-test and parity tests compare against.

The runtime receives float samples s in [-1, 1) and gives the teacher
int16-scale values a = 32768 s. Token t reads the 13152 samples ending at
sample 1280 (t + 1) of the stream, zeros before its start: with LEAD = 11872
zeros in front, padded[1280 t : 1280 t + 13152]. Its embedding is the step
floor's (stream_embed): 10 groups of 8 mel frames, each from its own 1632
samples and floored under its own maximum, the first 76 frames through the
embedding graph. Then x_t = W' e_t + b', the student's standardization folded
into its projection (fold_projection), the Mega layers and the final norm;

  classify_clip: the clip zero-padded to whole chunks and at least one window
                 (padded_clip_samples), the logits of the mean over all its
                 tokens (MegaKWS.forward's pooling);
  stream_logits: after each chunk, the logits of the mean over the last
                 window_chunks chunks (fewer at the start; hop_logits).

reference_teacher runs both graphs in float64 (the exact answer the runtime's
float32 approximates)."""

import copy

import numpy as np
import torch

from mega_kws_tools.model import MegaKWS
from mega_kws_tools.teacher import features, stream_embed, torch_port

TOKEN_SAMPLES = stream_embed.SAMPLES_PER_STEP  # 1280: patch_stride
TOKEN_SPAN = stream_embed.EMIT_SAMPLES  # 13152: patch_kernel
LEAD = TOKEN_SPAN - TOKEN_SAMPLES  # 11872 zeros before the stream's first sample


def reference_teacher(mel_graph, emb_graph) -> features.Teacher:
    """The teacher with its embedding graph in float64 too (the melspectrogram already is)."""
    teacher = features.Teacher(mel_graph, emb_graph)
    teacher.embedding = torch_port.PortedGraph(emb_graph, dtype=torch.float64)
    return teacher


def step_embeddings(teacher: features.Teacher, audio) -> torch.Tensor:
    """int16-scale audio [N] -> [n_steps(N), 96] with the step floor: group g is frames [8g, 8g + 8)
    from samples [1280 g, 1280 g + 1632), floored under its own maximum; embedding k reads groups
    k..k + 9 (the first 76 of their frames). In the dtype of the teacher's embedding graph."""
    a = torch.as_tensor(np.asarray(audio), dtype=torch.float64)
    if stream_embed.n_steps(len(a)) == 0:
        return torch.zeros(0, features.N_EMBEDDING, dtype=teacher.embedding.dtype)
    groups = a.unfold(0, stream_embed.GROUP_SPAN, TOKEN_SAMPLES)[:stream_embed.n_groups(len(a))]
    with torch.no_grad():
        mel = features.scale_mel(teacher.mel(groups)[:, 0])  # [G, 8, 32], each group its own floor
        return teacher.embed(mel.reshape(1, -1, features.N_MEL))[0]


def stream_embeddings(teacher: features.Teacher, samples) -> torch.Tensor:
    """Float samples [n] -> the embeddings of tokens 0 .. n // 1280 - 1 (the LEAD zeros first); samples
    beyond full scale clipped to +-1 and non-finite ones 0, as the runtime's input hygiene has them
    (clean_sample, kMaxSampleMagnitude)."""
    x = np.asarray(samples, np.float32)
    s = np.where(np.isfinite(x), np.clip(x, -1.0, 1.0), 0.0).astype(np.float64) * features.SAMPLE_SCALE
    return step_embeddings(teacher, np.concatenate([np.zeros(LEAD), s]))


def fold_projection(model) -> tuple:
    """(W', b') float32: the student's (x - mean) / std then Linear folded into one map,
    W' = W / std (per input column), b' = b - W' mean."""
    p = model.embed_tokens
    w = p.proj.weight.detach().double() / p.std.detach().double()[None, :]
    b = p.proj.bias.detach().double() - w @ p.mean.detach().double()
    return w.float(), b.float()


def folded_student(model):
    """A copy of the student whose projection is the file's (fold_projection), statistics 0 and 1."""
    folded = copy.deepcopy(model).eval()
    w, b = fold_projection(model)
    with torch.no_grad():
        p = folded.embed_tokens
        p.mean.zero_()
        p.std.fill_(1.0)
        p.proj.weight.copy_(w)
        p.proj.bias.copy_(b)
    return folded


def padded_clip_samples(cfg, n: int) -> int:
    """runtime/include/mega/mega.hpp: whole chunks of chunk_size tokens, at least one window."""
    chunk = cfg.chunk_size * TOKEN_SAMPLES
    return max(-(-max(n, 1) // chunk) * chunk, cfg.window_chunks * chunk)


def _double(model):
    return copy.deepcopy(model).double().eval()


def classify_clip(model, teacher, samples) -> np.ndarray:
    """The logits (float64) the runtime's classify_clip gives for float samples [n]."""
    x = np.zeros(padded_clip_samples(model.cfg, len(samples)), np.float32)
    x[:len(samples)] = samples
    e = stream_embeddings(teacher, x)
    with torch.no_grad():
        return MegaKWS.forward(_double(model), e.double()[None])[0].numpy()  # the mean over all tokens


def stream_logits(model, teacher, samples) -> np.ndarray:
    """[n // chunk_samples, n_classes] float64: the logits a stream reports after each whole chunk."""
    c = model.cfg.chunk_size
    e = stream_embeddings(teacher, samples)
    e = e[:len(e) // c * c]
    if len(e) == 0:
        return np.zeros((0, model.cfg.n_classes))
    with torch.no_grad():
        return _double(model).hop_logits(e.double()[None])[0].numpy()

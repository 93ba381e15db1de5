# SPDX-License-Identifier: Apache-2.0
"""The float16 range of a model, measured once by the converter (schema 5).

The CUDA backend stores most activations in float16 when asked to
(kernels/cuda/fp16_range.h): the residual stream divided by a power of two,
x_scale, the other float16 tensors as they are. Which x_scale, and whether
the model fits float16 at all, follows from the largest magnitude of each of
those tensors on the self-test clip. The runtime used to measure them with a
float32 pass of its own at every engine creation (seconds on the base model);
the converter measures the same tensors here, in the PyTorch model, and
stores the two peaks (the residual stream's and the rest's) with the tensor
and layer that reached them, so engine creation only reads them.

The tensor names are the runtime's (fp16_range.cpp), so its refusal names the
same tensor whichever side measured it. Layers count from 0; -1 is the patch
embedding, before the first layer.
"""

import math

import torch
import torch.nn.functional as F

from mega_kws_tools import model as mt

# laplace weights saturate far below float16's limit: a score that overflows
# gives the weight float32 gives while the bias stays far from the limit too
# (fp16_range.cpp, RangeProbe::kSaturatedBias = 65504 / 2)
_SATURATED_BIAS = 65504.0 / 2


class _Peaks:
    """The largest magnitude seen per kind, with where it was seen."""

    def __init__(self):
        self.peak = {"residual": (0.0, "", -1), "other": (0.0, "", -1)}
        self.layer = -1

    def note(self, kind, tensor, value):
        m = value.detach().abs().max().item() if value.numel() else 0.0
        if math.isnan(m):
            m = math.inf
        if m > self.peak[kind][0]:
            self.peak[kind] = (m, tensor, self.layer)


def _note_attention(p, layer, q, k):
    """Scores and weights per chunk, as the runtime stores them (q k^T scaled, then the bias and f)."""
    cfg = layer.cfg
    raw = torch.einsum("bnic,bnjc->bnij", *(t.unflatten(1, (-1, cfg.chunk_size)) for t in (q, k)))
    scale = cfg.z_dim ** -0.5 if cfg.attention_fn == "softmax" else 1.0 / cfg.chunk_size
    bias = layer.rel_pos_bias()
    if cfg.attention_fn != "laplace" or bias.abs().max().item() >= _SATURATED_BIAS:
        p.note("other", "attention scores (q k^T scaled)", raw * scale)
    scores = raw * scale + bias
    if cfg.attention_fn == "softmax":
        p.note("other", "attention weights", scores)
        weights = torch.softmax(scores, dim=-1)
    else:
        weights = mt.laplace(scores) if cfg.attention_fn == "laplace" else torch.square(F.relu(scores))
    p.note("other", "attention weights", weights)


def _mega_layer_hooks(p, layer):
    cfg = layer.cfg
    d, z, h = cfg.embed_dim, cfg.z_dim, cfg.hidden_dim

    def on_layer(module, inputs):
        # the runtime counts a layer from its EMA, which it runs before v_proj
        # (and after the prenorm, which so counts with the layer before)
        p.layer += 1

    def on_ema(module, inputs, out):
        p.note("other", "EMA output", out)

    def on_v(module, inputs, out):
        p.note("residual", "v projection", out - module.bias)
        p.note("other", "v", layer.act(out))

    def on_gate(module, inputs, out):
        p.note("other", "gate projection (u, z, r, hx)", out - module.bias)
        u, zr, hx = torch.split(out, [d, z + h, d], dim=-1)
        zz = F.silu(zr)
        p.note("other", "gate (u, z, r, hx)", torch.cat([torch.sigmoid(u), zz, hx], dim=-1))
        qk = zz[..., :z].unsqueeze(2) * layer.gamma + layer.beta
        q, k = torch.unbind(qk, dim=2)
        p.note("other", "q", q)
        p.note("other", "k", k)
        _note_attention(p, layer, q, k)

    return [layer.v_proj.register_forward_pre_hook(on_layer), layer.move.register_forward_hook(on_ema),
            layer.v_proj.register_forward_hook(on_v),
            layer.mx_proj.register_forward_hook(on_gate)]


def _watch_residual(p, sublayer, prenorm, tensor):
    """The residual stream after a sublayer: its output (prenorm) or its norm's input (postnorm)."""
    if prenorm:
        return sublayer.register_forward_hook(lambda m, i, out: p.note("residual", tensor, out))
    return sublayer.norm.register_forward_pre_hook(lambda m, i: p.note("residual", tensor, i[0]))


def _ffn_hidden_hook(p, act):
    """fc1's raw output (it reads the residual stream) and after its bias and activation."""
    def on_fc1(module, inputs, out):
        p.note("residual", "FFN hidden layer", out - module.bias)
        p.note("residual", "FFN hidden layer", act(out))
    return on_fc1


def measure(model: mt.MegaKWS, samples) -> dict:
    """{"residual": (peak, tensor, layer), "other": (...)} over one float32
    forward pass of samples (raw audio, before input scaling)."""
    p = _Peaks()
    cfg = model.cfg
    hooks = [model.embed_tokens.register_forward_hook(
        lambda m, i, out: p.note("residual", "patch embedding", out))]
    for module in model.modules():
        if isinstance(module, mt.SeqNorm):
            hooks.append(module.register_forward_hook(lambda m, i, out: p.note("residual", "norm output", out)))
    for enc in model.layers:
        hooks += _mega_layer_hooks(p, enc.mega_layer)
        hooks.append(_watch_residual(p, enc.mega_layer, cfg.prenorm, "residual stream x"))
        if enc.nffn is not None:
            hooks.append(enc.nffn.fc1.register_forward_hook(_ffn_hidden_hook(p, enc.nffn.act)))
            hooks.append(_watch_residual(p, enc.nffn, cfg.prenorm, "residual stream x (after the FFN)"))
    try:
        with torch.no_grad():
            model(torch.as_tensor(samples, dtype=torch.float32).unsqueeze(0))
    finally:
        for hk in hooks:
            hk.remove()
    return p.peak

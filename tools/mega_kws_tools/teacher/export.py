# SPDX-License-Identifier: Apache-2.0
"""The teacher's two graphs as the named tensors of a TeacherEmbedding model
file (formats/mega_model.fbs, the comment above PatchFeatures; the runtime's
front end, kernels/cpu/teacher_frontend.h, runs them):

  teacher.constants       (4,) the melspectrogram's Clip floor, its top_db,
                          the LeakyRelu slope, the Max floor
  teacher.stft_real/imag  (257, 512) the STFT's two strided convolutions
  teacher.mel             (257, 32) the mel matrix
  teacher.conv{i}.weight  (c_out, c_in, kh, kw), i = 0..19, as SPECS
  teacher.conv{i}.bias    (c_out,), i = 0..18 (the last convolution has none)

Every shape, padding and pooling is checked against SPECS (the runtime's
kConvSpecs) first, so graphs of another shape are refused, naming the node.
The list's order is also teacher_check's raw weights layout (its test)."""

import numpy as np

from mega_kws_tools.teacher.features import N_FFT, N_MEL

N_BINS = N_FFT // 2 + 1  # 257
# The embedding graph's convolutions as kConvSpecs (kernels/cpu/teacher_frontend.cpp) has them:
# (c_in, c_out, kernel, width padding, the max-pool after it or None)
SPECS = [(1, 24, (3, 3), 1, None), (24, 24, (1, 3), 1, None), (24, 24, (3, 1), 0, (2, 2))]
for _c_in, _c, _pool in ((24, 48, (1, 2)), (48, 72, (2, 2)), (72, 96, (1, 2)), (96, 96, (2, 2))):
    SPECS += [(_c_in, _c, (1, 3), 1, None), (_c, _c, (3, 1), 0, None), (_c, _c, (1, 3), 1, None),
              (_c, _c, (3, 1), 0, _pool)]
SPECS.append((96, 96, (3, 1), 0, None))


def _value(g, name):
    consts = {n.outputs[0]: n.attrs["value"] for n in g.nodes if n.op == "Constant"}
    return np.asarray(g.weights[name] if name in g.weights else consts[name], np.float32)


def _first(g, op, what):
    for n in g.nodes:
        if n.op == op:
            return n
    raise ValueError(f"the {what} graph has no {op} node")


def _check(name, got, want):
    if tuple(got) != tuple(want):
        raise ValueError(f"teacher graph: {name} is {tuple(got)}, the runtime expects {tuple(want)}")


def _constants(mel, emb):
    reduce_max = _first(mel, "ReduceMax", "melspectrogram").outputs[0]
    top_db = [n for n in mel.nodes if n.op == "Sub" and n.inputs[0] == reduce_max]
    alphas = {n.attrs.get("alpha", 0.01) for n in emb.nodes if n.op == "LeakyRelu"}
    floors = {float(_value(emb, n.inputs[1]).ravel()[0]) for n in emb.nodes if n.op == "Max"}
    if len(top_db) != 1 or len(alphas) != 1 or len(floors) != 1:
        raise ValueError("teacher graph: want one top_db Sub, one LeakyRelu alpha and one Max constant, got "
                         f"{len(top_db)}, {sorted(alphas)}, {sorted(floors)}")
    clip = _value(mel, _first(mel, "Clip", "melspectrogram").inputs[1]).ravel()[0]
    return np.array([clip, _value(mel, top_db[0].inputs[1]).ravel()[0], alphas.pop(), floors.pop()], np.float32)


def _front(mel):
    """The STFT's real and imaginary rows and the mel matrix."""
    convs = [n for n in mel.nodes if n.op == "Conv"]
    _check("the melspectrogram's Conv count", (len(convs),), (2,))
    out = []
    for name, conv in zip(("teacher.stft_real", "teacher.stft_imag"), convs):
        w = mel.weights[conv.inputs[1]]
        _check(f"{name} ({conv.name or conv.inputs[1]})", w.shape, (N_BINS, 1, N_FFT))
        out.append((name, w.reshape(N_BINS, N_FFT)))
    matrix = mel.weights[_first(mel, "MatMul", "melspectrogram").inputs[1]]
    _check("teacher.mel", matrix.shape, (N_BINS, N_MEL))
    return out + [("teacher.mel", matrix)]


def _convolutions(emb):
    layers = [i for i, n in enumerate(emb.nodes) if n.op == "Conv"]
    _check("the embedding graph's Conv count", (len(layers),), (len(SPECS),))
    out = []
    for k, (i, (c_in, c_out, kernel, pad, pool)) in enumerate(zip(layers, SPECS)):
        n = emb.nodes[i]
        w = emb.weights[n.inputs[1]]
        after = [m for m in emb.nodes[i + 1:i + 4] if m.op in ("MaxPool", "Conv")][:1]
        got_pool = tuple(after[0].attrs["kernel_shape"]) if after and after[0].op == "MaxPool" else None
        what = f"teacher.conv{k} ({n.name or n.inputs[1]})"
        _check(what + " weight", w.shape, (c_out, c_in) + kernel)
        _check(what + " pads", n.attrs.get("pads", [0] * 4), [0, pad, 0, pad] if pad else [0] * 4)
        _check(what + " pooling after it", got_pool or (), pool or ())
        _check(what + " bias", (len(n.inputs) > 2,), (k + 1 < len(SPECS),))
        out.append((f"teacher.conv{k}.weight", w))
        if len(n.inputs) > 2:
            out.append((f"teacher.conv{k}.bias", emb.weights[n.inputs[2]]))
    return out


def teacher_tensors(mel, emb) -> list:
    """[(name, float32 array)] of the melspectrogram and embedding graphs (graph.Graph), in the
    module docstring's order; ValueError naming the first node whose shape is not the runtime's."""
    named = [("teacher.constants", _constants(mel, emb))] + _front(mel) + _convolutions(emb)
    return [(name, np.ascontiguousarray(a, np.float32)) for name, a in named]

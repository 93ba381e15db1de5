# SPDX-License-Identifier: Apache-2.0
"""The teacher's two graphs at their real shapes with random weights, built
with onnx.helper (no download), and a tiny random student on them: for the
tests of the C++ front end (tests/kernels/test_teacher_frontend.py), of the
TeacherEmbedding model file (test_teacher_model.py) and the runtime's
teacher_tiny fixture (tests/fixtures/make_fixtures.py)."""

import numpy as np

import torch

from mega_kws_tools.teacher import export, features
from mega_kws_tools.teacher import student_runtime as sr
from tests.tools.test_student import tiny
from tests.tools.test_teacher_port import conv_block, mel_graph, to_graph, weight


def random_graphs():
    """(melspectrogram graph, embedding graph), the convolutions scaled so that the activations keep
    their spread through 20 layers; each call draws new weights."""
    from onnx import TensorProto, helper, numpy_helper
    mel = mel_graph(n_fft=features.N_FFT, hop=features.HOP, n_bins=export.N_BINS, n_mel=features.N_MEL)
    nodes = [helper.make_node("Reshape", ["input_1", "in_shape"], ["x"])]
    weights = [weight("floor", np.full((1, 1, 1, 1), -0.4)),
               numpy_helper.from_array(np.array([-1, 1, features.WINDOW_FRAMES, features.N_MEL], np.int64), "in_shape"),
               numpy_helper.from_array(np.array([-1, 1, 1, 96], np.int64), "out_shape")]
    x = "x"
    for i, (c_in, c_out, kernel, pad, pool) in enumerate(export.SPECS[:-1]):
        more, w, x = conv_block(f"b{i}", x, c_in, c_out, kernel, [0, pad, 0, pad] if pad else None)
        nodes, weights = nodes + more, weights + w
        if pool:
            nodes.append(helper.make_node("MaxPool", [x], [f"p{i}"], strides=list(pool), kernel_shape=list(pool)))
            x = f"p{i}"
    nodes += [helper.make_node("Conv", [x, "last_w"], ["last"], kernel_shape=[3, 1]),
              helper.make_node("Reshape", ["last", "out_shape"], ["output"])]
    weights.append(weight("last_w", np.random.default_rng(4).normal(0, 0.1, (96, 96, 3, 1))))
    emb = to_graph(nodes, [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, ["n", 76, 32, 1])],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 1, 1, 96])], weights)
    for name, w in emb.weights.items():
        if name.endswith("_w") and w.ndim == 4:
            emb.weights[name] = (w * 2.5).astype(np.float32)
    return mel, emb


def small_student(graphs, seed=4):
    """A tiny random student (D 16, 2 layers, chunk 3, window 2) standardizing by the statistics of the
    graphs' embeddings of noise (far from 0 and 1: folding them matters), logits of order 1."""
    model = tiny(embed_dim=16, hidden_dim=24, ffn_hidden_dim=24, z_dim=8, classifier_dim=16, n_layers=2,
                 truncation=4, window_chunks=2)
    noise = (0.3 * np.random.default_rng(seed).standard_normal(3 * 16000)).astype(np.float32)
    model.embed_tokens.set_statistics(sr.stream_embeddings(sr.reference_teacher(*graphs), noise).float().numpy())
    with torch.no_grad():
        model.sentence_projection_layer.weight.mul_(10.0)
    return model

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The teacher front end in C++ (kernels/cpu/teacher_frontend.h, run by the
test-only program teacher_check) against the torch port
(tools/mega_kws_tools/teacher): the same embeddings, within 1e-4 of their
range, on the sample recordings and synthetic audio, for

- the whole clip under one floor (the graph as features.Teacher runs it, with
  the optimized kernels and the scalar references), and
- each 80 ms step floored under its own maximum (the streaming runner, fed in
  blocks of several sizes; the port runs the melspectrogram on each step's
  1632 samples, as openWakeWord's streaming loop runs it on each chunk).

The weights come from a graph of the real shapes with random values built
with onnx.helper (no download), and from the real files where they are
(work/teacher, or MEGA_TEACHER_DIR; else those cases skip). The weights file
is test-only raw float32 (teacher_check.cpp says its layout)."""

import glob
import os
import subprocess

import numpy as np
import pytest
import torch

from mega_kws_tools.audio import SR, read_wav
from mega_kws_tools.teacher import features, fetch, port_check
from tests.tools.test_teacher_port import conv_block, mel_graph, to_graph, weight

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.environ.get("TEACHER_CHECK", os.path.join(ROOT, "build", "tests", "teacher_check"))
MODELS = os.environ.get("MEGA_TEACHER_DIR", os.path.join(ROOT, fetch.DEFAULT_OUT))
TOL = 1e-4
STEP_SPAN = (features.STEP_FRAMES - 1) * features.HOP + features.N_FFT  # 1632 samples: one step's 8 frames
# The embedding graph's convolutions as kConvSpecs (kernels/cpu/teacher_frontend.cpp) has them:
# (c_in, c_out, kernel, width padding, the max-pool after it or None)
SPECS = [(1, 24, (3, 3), 1, None), (24, 24, (1, 3), 1, None), (24, 24, (3, 1), 0, (2, 2))]
for _c_in, _c, _pool in ((24, 48, (1, 2)), (48, 72, (2, 2)), (72, 96, (1, 2)), (96, 96, (2, 2))):
    SPECS += [(_c_in, _c, (1, 3), 1, None), (_c, _c, (3, 1), 0, None), (_c, _c, (1, 3), 1, None),
              (_c, _c, (3, 1), 0, _pool)]
SPECS.append((96, 96, (3, 1), 0, None))

needs_check = pytest.mark.skipif(not os.access(CHECK, os.X_OK), reason=f"{CHECK} not built (TEACHER_CHECK)")
needs_files = pytest.mark.skipif(not all(os.path.isfile(os.path.join(MODELS, n)) for n in fetch.TEACHER_FILES),
                                 reason=f"teacher files not in {MODELS} (python3 -m mega_kws_tools.teacher.fetch)")


def random_graphs():
    """The two graphs at their real shapes with random weights, the convolutions scaled so that the
    activations keep their spread through 20 layers."""
    from onnx import TensorProto, helper, numpy_helper
    mel = mel_graph(n_fft=features.N_FFT, hop=features.HOP, n_bins=257, n_mel=features.N_MEL)
    nodes = [helper.make_node("Reshape", ["input_1", "in_shape"], ["x"])]
    weights = [weight("floor", np.full((1, 1, 1, 1), -0.4)),
               numpy_helper.from_array(np.array([-1, 1, features.WINDOW_FRAMES, features.N_MEL], np.int64), "in_shape"),
               numpy_helper.from_array(np.array([-1, 1, 1, 96], np.int64), "out_shape")]
    x = "x"
    for i, (c_in, c_out, kernel, pad, pool) in enumerate(SPECS[:-1]):
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


def _value(g, name):
    consts = {n.outputs[0]: n.attrs["value"] for n in g.nodes if n.op == "Constant"}
    return np.asarray(g.weights[name] if name in g.weights else consts[name], np.float32)


def _first(g, op, **where):
    return next(n for n in g.nodes if n.op == op and all(getattr(n, k) == v for k, v in where.items()))


def teacher_floats(mel, emb) -> np.ndarray:
    """teacher_check's weights file: clip_min, top_db, alpha, floor, the STFT, the mel matrix, the convolutions;
    each convolution's shape, padding and pooling checked against SPECS first."""
    convs = [n for n in mel.nodes if n.op == "Conv"]
    top_db = next(n for n in mel.nodes if n.op == "Sub" and n.inputs[0] == _first(mel, "ReduceMax").outputs[0])
    alphas = {n.attrs["alpha"] for n in emb.nodes if n.op == "LeakyRelu"}
    floors = {float(_value(emb, n.inputs[1]).ravel()[0]) for n in emb.nodes if n.op == "Max"}
    assert len(alphas) == 1 and len(floors) == 1, "one LeakyRelu alpha and one Max constant"
    parts = [[_value(mel, _first(mel, "Clip").inputs[1]), _value(mel, top_db.inputs[1]), alphas.pop(), floors.pop()],
             mel.weights[convs[0].inputs[1]], mel.weights[convs[1].inputs[1]],
             mel.weights[_first(mel, "MatMul").inputs[1]]]
    layers = [i for i, n in enumerate(emb.nodes) if n.op == "Conv"]
    assert len(layers) == len(SPECS)
    for i, (c_in, c_out, kernel, pad, pool) in zip(layers, SPECS):
        n = emb.nodes[i]
        w = emb.weights[n.inputs[1]]
        after = [m for m in emb.nodes[i + 1:i + 4] if m.op in ("MaxPool", "Conv")][:1]
        got_pool = tuple(after[0].attrs["kernel_shape"]) if after and after[0].op == "MaxPool" else None
        assert (w.shape, n.attrs.get("pads", [0] * 4), got_pool) == ((c_out, c_in) + kernel, [0, pad, 0, pad] if pad
                                                                      else [0] * 4, pool), n.name
        parts += [w] + ([emb.weights[n.inputs[2]]] if len(n.inputs) > 2 else [])
    return np.concatenate([np.asarray(p, np.float32).ravel() for p in parts])


def run_check(tmp_path, floats, audio, *args) -> np.ndarray:
    paths = [str(tmp_path / name) for name in ("weights.f32", "audio.f32", "out.f32")]
    floats.astype("<f4").tofile(paths[0])
    np.asarray(audio, "<f4").tofile(paths[1])
    subprocess.run([CHECK, *paths, *args], check=True, capture_output=True, text=True)
    return np.fromfile(paths[2], "<f4").reshape(-1, 96)


def port_clip(teacher, audio) -> np.ndarray:
    with torch.no_grad():
        return teacher(torch.from_numpy(np.asarray(audio, np.float32))[None])[0].numpy()


def port_steps(teacher, audio) -> np.ndarray:
    """Each step's 8 frames from its own 1632 samples (its own floor), then the windows every 8 frames."""
    n_steps = max(0, (len(audio) - (STEP_SPAN - features.SAMPLES_PER_EMBEDDING)) // features.SAMPLES_PER_EMBEDDING)
    segments = np.stack([audio[k * 1280:k * 1280 + STEP_SPAN] for k in range(n_steps)]).astype(np.float32)
    with torch.no_grad():
        mel = teacher.melspectrogram(torch.from_numpy(segments)).reshape(1, -1, features.N_MEL)
        return teacher.embed(mel)[0].numpy()


def clips():
    """The sample recordings (commands.wav cut to 5 s) and synthetic signals, two seconds each, as int16 values."""
    out = {os.path.basename(w): read_wav(w)[:5 * SR].astype(np.float32)
           for w in sorted(glob.glob(os.path.join(ROOT, "samples", "*.wav")))[:4]}
    out.update({k: v.astype(np.float32) for k, v in port_check.synthetic_audio(2 * SR, seed=83).items()})
    return out


def check_graphs(tmp_path, mel, emb):
    floats, teacher = teacher_floats(mel, emb), features.Teacher(mel, emb)
    worst = {}
    for label, audio in clips().items():
        runs = {"clip": (port_clip(teacher, audio), ["--floor", "clip"]),
                "step": (port_steps(teacher, audio), ["--floor", "step"]),
                "stream": (port_steps(teacher, audio), ["--blocks", "1,777,1280,4093"])}
        for mode, (want, args) in runs.items():
            got = run_check(tmp_path, floats, audio, *args)
            assert got.shape == want.shape and len(want) >= 3, (label, mode, got.shape, want.shape)
            ratio = float(np.abs(got - want).max()) / port_check.scale_of(want)
            worst[mode] = max(worst.get(mode, 0.0), ratio)
            assert ratio <= TOL, f"{label}, {mode}: {ratio:.2e} of the range"
            if label != "silence":
                assert port_check.scale_of(want) > 1e-3, f"{label}: the embeddings hardly vary"
    print("largest difference / range:", {k: f"{v:.1e}" for k, v in worst.items()})
    return floats


@needs_check
def test_random_graph_of_the_real_shapes(tmp_path):
    graphs = random_graphs()  # each call draws new weights
    floats = check_graphs(tmp_path, *graphs)
    audio = clips()["noise"]  # the scalar references too
    teacher = features.Teacher(*graphs)
    got = run_check(tmp_path, floats, audio, "--floor", "clip", "--impl", "reference")
    want = port_clip(teacher, audio)
    assert np.abs(got - want).max() <= TOL * port_check.scale_of(want)


@needs_check
def test_refuses_a_weights_file_of_another_layout(tmp_path):
    floats = teacher_floats(*random_graphs())
    with pytest.raises(subprocess.CalledProcessError) as e:
        run_check(tmp_path, floats[:-1], np.zeros(SR))
    assert "the layout wants" in e.value.stderr


@needs_check
@needs_files
def test_real_graphs(tmp_path):
    mel, emb = features.load_graphs(MODELS)
    floats = check_graphs(tmp_path, mel, emb)
    paths = [str(tmp_path / "weights.f32"), str(tmp_path / "audio.f32")]
    floats.astype("<f4").tofile(paths[0])
    clips()["noise"].astype("<f4").tofile(paths[1])
    out = subprocess.run([CHECK, *paths, "--bench", "20"], check=True, capture_output=True, text=True).stdout
    assert "20 embeddings" in out and "ms per 1280-sample step" in out

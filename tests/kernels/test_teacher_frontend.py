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
from mega_kws_tools.teacher import export, features, fetch, port_check, student_runtime
from tests.tools.teacher_graphs import random_graphs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.environ.get("TEACHER_CHECK", os.path.join(ROOT, "build", "tests", "teacher_check"))
MODELS = os.environ.get("MEGA_TEACHER_DIR", os.path.join(ROOT, fetch.DEFAULT_OUT))
TOL = 1e-4
needs_check = pytest.mark.skipif(not os.access(CHECK, os.X_OK), reason=f"{CHECK} not built (TEACHER_CHECK)")
needs_files = pytest.mark.skipif(not all(os.path.isfile(os.path.join(MODELS, n)) for n in fetch.TEACHER_FILES),
                                 reason=f"teacher files not in {MODELS} (python3 -m mega_kws_tools.teacher.fetch)")


def teacher_floats(mel, emb) -> np.ndarray:
    """teacher_check's weights file: the model file's teacher tensors (teacher.export, which checks each
    convolution's shape, padding and pooling against the runtime's) in their order."""
    return np.concatenate([a.ravel() for _, a in export.teacher_tensors(mel, emb)])


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
    return student_runtime.step_embeddings(teacher, audio).numpy()


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

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 84 with the pretrained teacher: `python3 -m mega_kws_tools.custom
--front-end teacher` (tools/mega_kws_tools/custom/teacher_front.py).

Its stages train and tune on windows of the teacher's tokens ending at each
hop; these tests hold that what they score is what the runtime's stream
scores: the written file streamed by the runtime gives the posteriors
TeacherFront.posteriors gives on those windows, and a long recording's
windows (made in blocks) are the windows of one stream. The teacher's graphs
here are random ones of its real shapes (no download); the command on the
real files runs where work/teacher holds them."""

import os
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

from mega_kws_tools.custom import teacher_front as tf
from mega_kws_tools.teacher import student_convert
from tests.tools.teacher_graphs import random_graphs, small_student

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("MEGA_KWS_CLI", os.path.join(ROOT, "build", "keyword_spotter"))
TEACHER = os.path.join(ROOT, "work", "teacher")


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    """The command's front end on random graphs, starting from a tiny random student written as the
    bundled teacher model is."""
    graphs = random_graphs()
    start = small_student(graphs)
    data, _ = student_convert.build_student_file(start, graphs, [f"w{i}" for i in range(start.cfg.n_classes)])
    path = tmp_path_factory.mktemp("backbone") / "start.mega"
    path.write_bytes(data)
    return tf.TeacherFront(None, str(path), graphs=graphs)


def audio(seconds, seed):
    rng = np.random.default_rng(seed)
    x = 0.05 * rng.standard_normal(int(seconds * 16000))
    x[8000:20000] += 0.3 * np.sin(np.arange(12000) * 0.07)  # something louder than the noise
    return x.astype(np.float32)


def trained(front, seed=3):
    """The starting student with a new projection onto 3 classes, its standardization taken from real
    tokens and a few steps trained (so that its posteriors move)."""
    x = np.stack([audio(2, s) for s in range(8)])
    emb = front.embed_last(x)
    model = front.new_model(3)
    weights = np.ones(len(emb))
    return front.train(model, emb, np.arange(len(emb)) % 3, weights, 5, seed)


def test_windows_of_each_hop_give_the_runtime_stream_s_posteriors(front, tmp_path):
    from mega_kws_tools.evaluation.runtime_posteriors import RuntimeModel
    model = trained(front)
    path = str(tmp_path / "t.mega")
    run = types.SimpleNamespace(labels=["lights"])
    front.write(run, model, None, path, "test")
    x = audio(4.2, 9)
    got = front.posteriors(model, front.hop_embeddings(x[None], np.float32))[0]
    want = RuntimeModel(path).stream_posteriors(x)
    assert got.shape == want.shape == (int(len(x) // 3840), 3)
    first = front.reach // front.chunk  # from here on the stream has seen the whole reach
    diff = np.abs(got[first:] - want[first:]).max()
    assert diff < 1e-4, diff
    stored = front.posteriors(model, front.hop_embeddings(x[None]))[0]  # float16, as the stages keep them
    assert np.abs(stored[first:] - want[first:]).max() < 1e-3
    assert np.abs(want[first:] - want[first:].mean(axis=0)).max() > 1e-3  # the posteriors move: a real check


def test_restandardizing_keeps_what_the_projection_computes(front):
    model = front.new_model(3)
    x = front.embed_last(np.stack([audio(2, s) for s in range(3)])).astype(np.float32)
    before = model.embed_tokens(torch.from_numpy(x)).detach().numpy()
    tf.restandardize(model.embed_tokens, x)
    after = model.embed_tokens(torch.from_numpy(x)).detach().numpy()
    p = model.embed_tokens  # new statistics (the file's are 0 and 1), the same map
    assert float((p.std - 1).abs().max()) > 0.1 and float(p.mean.abs().max()) > 0.1
    np.testing.assert_allclose(after, before, atol=1e-3 * np.abs(before).max())


def test_the_start_must_be_a_teacher_embedding_file(tmp_path):
    with pytest.raises(ValueError, match="not the teacher's"):
        tf.TeacherFront(None, os.path.join(ROOT, "models", "sc10-demo.mega"), graphs=random_graphs())


def test_a_recording_s_windows_are_those_of_one_stream(front):
    x = audio(6.1, 4)
    windows, ends = front.speech_hops(x, block=7)  # blocks of 7 tokens: many seams
    stream = front.hop_embeddings(x[None])[0]
    end_tokens = np.round(ends * 16000 / tf.TOKEN).astype(int)
    assert end_tokens[0] == 27 and np.all(np.diff(end_tokens) == 3)
    hops = end_tokens // 3 - 1
    assert len(windows) == len(hops) and hops[-1] == len(stream) - 1
    np.testing.assert_allclose(windows.astype(np.float32), stream[hops].astype(np.float32), atol=2e-3)


def test_missing_teacher_files_are_refused_with_one_line_naming_the_fetch(tmp_path):
    cmd = [sys.executable, "-m", "mega_kws_tools.custom", "--keyword", "lights", "--front-end", "teacher",
           "--teacher", str(tmp_path / "none"), "--out", str(tmp_path / "m.mega"), "--work", str(tmp_path / "run"),
           "--data", str(tmp_path / "no-data")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "mega_kws_tools.teacher.fetch" in lines[0], r.stderr
    assert not (tmp_path / "m.mega").exists() and not (tmp_path / "run" / "text").exists()


@pytest.mark.skipif(not os.path.exists(os.path.join(TEACHER, "embedding_model.onnx")) or not os.path.exists(CLI),
                    reason="the teacher's files (python3 -m mega_kws_tools.teacher.fetch) or keyword_spotter absent")
def test_tiny_teacher_run_writes_a_model_the_runtime_uses(tmp_path):
    out = tmp_path / "banana.mega"
    cmd = [sys.executable, "-m", "mega_kws_tools.custom", "--keyword", "banana", "--front-end", "teacher",
           "--out", str(out), "--work", str(tmp_path / "run"), "--data", str(tmp_path / "no-data"),
           "--keyword-spotter", CLI, "--renders", "8", "--copies", "2", "--held-out", "3", "--voices", "3",
           "--near", "6", "--steps", "200", "--threads", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert "runtime self-test passed" in r.stderr
    info = subprocess.run([CLI, "info", "-m", str(out)], capture_output=True, text=True)
    assert info.returncode == 0 and "banana,_silence_,_unknown_" in info.stdout, info.stdout + info.stderr
    assert "teacher" in info.stdout, info.stdout

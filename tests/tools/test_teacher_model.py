#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 83 item 4b, candidate (b) in the runtime, the Python side: a
student (teacher.student) converted into a TeacherEmbedding file
(teacher.student_convert, schema 6) and the reference of what the runtime
computes for it (teacher.student_runtime), on the teacher's graphs at their
real shapes with random weights (no download) and a tiny random student:

- the file: version 6, the hparams, every tensor's name and shape as
  formats/mega_model.fbs lists them, the teacher's values, the folded
  projection equal to the student's standardize-then-project;
- the reference: a token reads the 13152 samples ending at 1280 (t + 1),
  zeros before the stream; the self-test logits equal an independent path
  (stream_embed's one-pass step-floor embedder in float32, the unfolded
  student); the stream's logits after each chunk equal the offline model on
  the tokens so far;
- refusals: a bidirectional student, graphs of another shape, no teacher
  files, mega_convert given a student;
- the runtime (this build's libmega_kws through python/mega_kws): its
  self-test, classify and per-hop stream logits against the reference,
  within PARITY_TOL (1e-4; 2.7e-5 measured on real models).

Run by ctest (test teacher_model) with MEGA_KWS_LIBRARY set; by hand:
/usr/bin/python3 -m pytest tests/tools/test_teacher_model.py (default: build/)."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from mega_kws_tools.audio import read_wav
from mega_kws_tools.convert import mega_convert
from mega_kws_tools.convert.schema import EmaDirection, PatchFeatures
from mega_kws_tools.model import MegaKWS
from mega_kws_tools.teacher import export, features, fetch, head, stream_embed, student_convert
from mega_kws_tools.teacher import student_runtime as sr
from tests.tools.teacher_graphs import random_graphs, small_student
from tests.tools.test_converter import parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("MEGA_KWS_LIBRARY", os.path.join(ROOT, "build", "libmega_kws.so"))
MODELS = os.environ.get("MEGA_TEACHER_DIR", os.path.join(ROOT, fetch.DEFAULT_OUT))
TOL = mega_convert.SELFTEST_TOLERANCE  # the file's self-test tolerance, for the runtime's float32
RNG = np.random.default_rng(4)


@pytest.fixture(scope="module")
def graphs():
    return random_graphs()


@pytest.fixture(scope="module")
def converted(graphs, tmp_path_factory):
    """(student, path of its file, the file's parsed contents)."""
    model = small_student(graphs)
    data, _ = student_convert.build_student_file(model, graphs, head.LABELS, notes="test")
    path = str(tmp_path_factory.mktemp("teacher_model") / "student.mega")
    mega_convert.write_atomic(path, data)
    return model, path, parse(path)


def test_the_file_has_version_6_and_the_students_hparams(converted):
    model, _, f = converted
    cfg, hp = model.cfg, f["hparams"]
    assert f["version"] == 6
    assert hp["PatchFeatures"] == PatchFeatures.PatchFeatures.TeacherEmbedding == 3
    assert (hp["PatchKernel"], hp["PatchStride"]) == (13152, 1280)
    assert hp["EmaDirection"] == EmaDirection.EmaDirection.Unidirectional
    assert (hp["EmbedDim"], hp["HiddenDim"], hp["NLayers"], hp["ChunkSize"], hp["WindowChunks"], hp["NClasses"]) == \
        (16, cfg.hidden_dim, 2, 3, 2, 12)
    assert f["scaling"] == (False, 0.0, 1.0) and f["labels"] == head.LABELS


def expected_shapes(cfg):
    """The schema comment's teacher tensors and the Mega layers' as mega_convert names them for MegaKWS."""
    want = {"teacher.constants": (4,), "teacher.stft_real": (257, 512), "teacher.stft_imag": (257, 512),
            "teacher.mel": (257, 32), "embed_tokens.weight": (cfg.embed_dim, 96), "embed_tokens.bias": (cfg.embed_dim,)}
    for i, (c_in, c_out, kernel, _, _) in enumerate(export.SPECS):
        want[f"teacher.conv{i}.weight"] = (c_out, c_in) + kernel
        if i < 19:
            want[f"teacher.conv{i}.bias"] = (c_out,)
    want.update({n: a.shape for n, a in mega_convert.file_tensors(MegaKWS(cfg)) if not n.startswith("embed_tokens.")})
    return want


def test_every_tensor_has_the_schemas_name_and_shape(converted, graphs):
    model, _, f = converted
    got = {name: shape for name, (shape, _, _) in f["tensors"].items()}
    assert got == expected_shapes(model.cfg)
    assert len(export.SPECS) == 20 and got["teacher.conv0.weight"] == (24, 1, 3, 3)
    assert got["teacher.conv19.weight"] == (96, 96, 3, 1) and "teacher.conv19.bias" not in got
    assert {dtype for _, dtype, _ in f["tensors"].values()} == {0}  # float32

    def values(name):
        return np.frombuffer(f["tensors"][name][2], "<f4").reshape(f["tensors"][name][0])
    mel, emb = graphs
    np.testing.assert_array_equal(values("teacher.constants"), np.float32([1e-10, 80, 0.2, -0.4]))
    convs = [n for n in emb.nodes if n.op == "Conv"]
    np.testing.assert_array_equal(values("teacher.conv7.weight"), emb.weights[convs[7].inputs[1]])
    np.testing.assert_array_equal(values("teacher.conv18.bias"), emb.weights[convs[18].inputs[2]])
    stft = [n for n in mel.nodes if n.op == "Conv"]
    np.testing.assert_array_equal(values("teacher.stft_imag"), mel.weights[stft[1].inputs[1]][:, 0])
    layers = dict(mega_convert.file_tensors(model))
    np.testing.assert_array_equal(values("layers.1.mega_layer.v_proj.weight"), layers["layers.1.mega_layer.v_proj.weight"])


def test_the_folded_projection_is_the_students(converted):
    model, _, f = converted
    w = np.frombuffer(f["tensors"]["embed_tokens.weight"][2], "<f4").reshape(16, 96).astype(np.float64)
    b = np.frombuffer(f["tensors"]["embed_tokens.bias"][2], "<f4").astype(np.float64)
    e = RNG.normal(3.0, 10.0, (50, 96))
    with torch.no_grad():
        want = model.embed_tokens.double()(torch.from_numpy(e)).numpy()
    model.float()
    scale = np.abs(want).max()
    assert scale > 1 and np.abs(e @ w.T + b - want).max() < 1e-5 * scale


def test_a_token_reads_the_13152_samples_ending_at_its_hop(graphs):
    teacher = sr.reference_teacher(*graphs)
    x = np.clip(0.3 * RNG.standard_normal(6 * 1280 + 500), -1, 1).astype(np.float32)  # within full scale
    tokens = sr.stream_embeddings(teacher, x).numpy()
    assert tokens.shape == (6, 96)
    padded = np.concatenate([np.zeros(11872), x.astype(np.float64) * 32768])
    for t in (0, 3, 5):
        alone = sr.step_embeddings(teacher, padded[1280 * t:1280 * t + 13152]).numpy()
        assert alone.shape == (1, 96)
        np.testing.assert_allclose(alone[0], tokens[t], rtol=0, atol=1e-9 * np.abs(tokens).max())
    later = x.copy()
    later[3 * 1280:] = 0.9 * RNG.standard_normal(len(x) - 3 * 1280)  # after token 2's end: token 3 on
    moved = np.abs(sr.stream_embeddings(teacher, later).numpy() - tokens).max(axis=1)
    assert moved[:3].max() == 0 and moved[3:].min() > 1e-6, moved


def test_self_test_is_classify_clip_by_an_independent_path(converted, graphs):
    """The file's self-test against the unfolded student on stream_embed's one-pass embedder (float32)."""
    model, _, f = converted
    cfg = student_convert.file_config(model.cfg)
    np.testing.assert_array_equal(f["st_input"], mega_convert.self_test_input(cfg))
    assert len(f["st_input"]) == 2 * 3 * 1280
    padded = np.concatenate([np.zeros(11872, np.float32), f["st_input"] * np.float32(32768)])
    embedder = stream_embed.StepFloorEmbedder(features.Teacher(*graphs))
    with torch.no_grad():
        e = embedder(torch.from_numpy(padded)[None])
        assert e.shape == (1, 6, 96)
        want = model.head(model.features(e).mean(dim=1))[0].numpy()  # the mean over all tokens
    assert np.ptp(want) > 1.0  # logits that say something
    assert np.abs(f["st_logits"] - want).max() < TOL


def test_classify_clip_pads_to_whole_chunks_and_a_window(converted, graphs):
    model = sr.folded_student(converted[0])
    teacher = sr.reference_teacher(*graphs)
    cfg = student_convert.file_config(model.cfg)
    assert [sr.padded_clip_samples(cfg, n) for n in (0, 1, 7680, 7681, 11520)] == [7680, 7680, 7680, 11520, 11520]
    x = (0.2 * RNG.standard_normal(9000)).astype(np.float32)
    padded = np.zeros(11520, np.float32)
    padded[:9000] = x
    np.testing.assert_array_equal(sr.classify_clip(model, teacher, x), sr.classify_clip(model, teacher, padded))


def test_stream_logits_are_the_offline_model_hop_by_hop(converted, graphs):
    model = sr.folded_student(converted[0])
    teacher = sr.reference_teacher(*graphs)
    x = (0.25 * RNG.standard_normal(5 * 3840 + 1000)).astype(np.float32)
    hops = sr.stream_logits(model, teacher, x)
    assert hops.shape == (5, 12)
    tokens = sr.stream_embeddings(teacher, x).double()
    m = model.double()
    with torch.no_grad():
        for h in range(5):  # the mean over the last 2 chunks (1 after the first) of the tokens so far
            np.testing.assert_allclose(hops[h], m(tokens[None, :3 * (h + 1)])[0].numpy(), rtol=0, atol=1e-9)
    model.float()
    # one window's stream ends where classify_clip of that window does
    np.testing.assert_allclose(hops[1], sr.classify_clip(model, teacher, x[:7680]), rtol=0, atol=1e-9)
    assert np.abs(hops[4] - hops[3]).max() > 1e-3
    assert sr.stream_logits(model, teacher, x[:3839]).shape == (0, 12)  # no whole chunk yet
    assert sr.stream_embeddings(teacher, x[:1279]).shape == (0, 96)


def save_student(path, model, **config):
    torch.save({"labels": head.LABELS, "mega_config": dict(vars(model.cfg), **config), "state": model.state_dict()},
               path)


def run(module, *args):
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True)


def test_refusals(tmp_path, graphs):
    model = small_student(graphs)
    ck = str(tmp_path / "best.pt")
    save_student(ck, model)
    r = run(student_convert.__name__, ck, "-o", str(tmp_path / "x.mega"), "--teacher", str(tmp_path / "none"))
    assert r.returncode == 1 and "mega_kws_tools.teacher.fetch" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run(mega_convert.__name__, ck, "-o", str(tmp_path / "x.mega"))
    assert r.returncode == 1 and "mega_kws_tools.teacher.student_convert" in r.stderr
    save_student(ck, model, bidirectional=True)
    r = run(student_convert.__name__, ck, "-o", str(tmp_path / "x.mega"))
    assert r.returncode == 1 and "unidirectional" in r.stderr and "TeacherEmbedding" in r.stderr
    mel, emb = random_graphs()
    convs = [n for n in emb.nodes if n.op == "Conv"]
    emb.weights[convs[5].inputs[1]] = emb.weights[convs[5].inputs[1]][:, :-1]
    with pytest.raises(mega_convert.ConvertError, match=r"teacher\.conv5 .*weight is \(48, 47, 1, 3\)"):
        student_convert.build_student_file(model, (mel, emb), head.LABELS)
    assert not os.path.exists(tmp_path / "x.mega")


@pytest.mark.skipif(not all(os.path.isfile(os.path.join(MODELS, n)) for n in fetch.TEACHER_FILES),
                    reason=f"teacher files not in {MODELS} (python3 -m mega_kws_tools.teacher.fetch)")
def test_the_command_converts_a_checkpoint_with_the_real_teacher(tmp_path, graphs):
    ck, out = str(tmp_path / "best.pt"), str(tmp_path / "s.mega")
    save_student(ck, small_student(graphs))
    r = run(student_convert.__name__, ck, "-o", out, "--teacher", MODELS)
    assert r.returncode == 0, r.stderr
    assert "the teacher's melspectrogram and speech embedding" in r.stdout and f"wrote {out}" in r.stdout
    assert parse(out)["version"] == 6


# ---- the runtime (this build's libmega_kws) against the reference ----

PARITY_TOL = 1e-4


def runtime_model(path):
    """mega_kws.Model of the file (this build's library: a file it cannot load fails the test)."""
    import mega_kws
    return mega_kws.Model(path)


def parity_files(graphs, converted, tmp_path):
    """[(label, student, graphs, path)]: the random graphs' file, and the real teacher's where fetched."""
    out = [("random", converted[0], graphs, converted[1])]
    if all(os.path.isfile(os.path.join(MODELS, n)) for n in fetch.TEACHER_FILES):
        real = features.load_graphs(MODELS)
        model = small_student(real)
        data, _ = student_convert.build_student_file(model, real, head.LABELS)
        mega_convert.write_atomic(str(tmp_path / "real.mega"), data)
        out.append(("real", model, real, str(tmp_path / "real.mega")))
    return out


def parity_clips():
    go = read_wav(os.path.join(ROOT, "samples", "go.wav")).astype(np.float32) / 32768
    t = np.arange(20000) / 16000
    return {"noise": (0.1 * RNG.standard_normal(10000)).astype(np.float32), "go.wav": go,
            "sweep": (0.5 * np.sin(2 * np.pi * (100 * t + 2000 * t * t))).astype(np.float32)}


def test_the_runtime_matches_the_reference(graphs, converted, tmp_path):
    import mega_kws
    for label, model, g, path in parity_files(graphs, converted, tmp_path):
        rt = runtime_model(path)
        folded, teacher = sr.folded_student(model), sr.reference_teacher(*g)
        session = mega_kws.Session(rt)
        assert session.self_test() <= PARITY_TOL, label
        for name, x in parity_clips().items():
            want = sr.classify_clip(folded, teacher, x)
            got = session.classify(x)
            assert np.abs(got - want).max() < PARITY_TOL, (label, name, "classify", np.abs(got - want).max())
            session.reset()
            want = sr.stream_logits(folded, teacher, x)
            got = np.concatenate([session.push(x[i:i + 1000]) for i in range(0, len(x), 1000)])
            assert got.shape == want.shape and len(want) >= 2, (label, name, got.shape, want.shape)
            assert np.abs(got - want).max() < PARITY_TOL, (label, name, "stream", np.abs(got - want).max())
            print(f"{label} {name}: classify and stream within {np.abs(got - want).max():.1e}")
            session.reset()


def test_the_runtime_refuses_a_teacher_file_it_cannot_run(graphs, converted):
    """The loader's checks of a TeacherEmbedding file (model.cpp check_teacher_front_end, model_tensors.cpp
    load_teacher), each on a file the converter's writer made with one thing wrong: bad_model and the
    reason, never a model that runs."""
    import mega_kws
    model = converted[0]
    cfg = student_convert.file_config(model.cfg)
    tensors = export.teacher_tensors(*graphs) + student_convert.student_tensors(sr.folded_student(model))
    st = (mega_convert.self_test_input(cfg), np.zeros(cfg.n_classes))

    def constants(i, value):
        return [(n, np.where(np.arange(4) == i, value, a).astype(np.float32) if n == "teacher.constants" else a)
                for n, a in tensors]
    cases = {
        "patch_kernel 13152 and patch_stride 1280": dict(cfg=dataclasses.replace(cfg, patch_kernel=13151)),
        "a unidirectional model": dict(cfg=dataclasses.replace(cfg, bidirectional=True)),
        "no input scaling": dict(input_mean=0.0, input_std=1.0),
        "positive Clip floor and top_db": dict(tensors=constants(1, 0.0)),
        "missing tensor 'teacher.conv7.bias'": dict(tensors=[t for t in tensors if t[0] != "teacher.conv7.bias"]),
    }
    for why, edit in cases.items():
        data = mega_convert.model_file_bytes(edit.pop("cfg", cfg), head.LABELS, edit.pop("tensors", tensors), st,
                                             None, **edit)
        path = os.path.join(os.path.dirname(converted[1]), "refused.mega")
        mega_convert.write_atomic(path, data)
        with pytest.raises(mega_kws.MegaError) as e:
            mega_kws.Model(path)
        assert why in str(e.value), (why, str(e.value))

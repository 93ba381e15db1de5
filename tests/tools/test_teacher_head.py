#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The teacher classifier's code (tools/mega_kws_tools/teacher: embed_cache and
head) on tiny generated data, without the teacher's files or any download:
clips placed where the teacher needs them, the cache written in shards and
resumed, the split never mixed, the figures counted as evaluate.py counts
them, and a head that learns separable embeddings, cannot learn shuffled
labels, and keeps the checkpoint with the best validation key."""

import json
import os
import wave

import numpy as np
import pytest
import torch

from mega_kws_tools.teacher import embed_cache, head
from mega_kws_tools.teacher.embed_cache import CONTEXT_SAMPLES, N_STEPS

RNG = np.random.default_rng(83)


def write_wav(path, samples):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.asarray(samples, dtype="<i2").tobytes())


def fake_embed(audio):
    """A stand-in teacher: each step the mean of its 2,000 samples, repeated 96 times."""
    steps = audio.reshape(audio.shape[0], N_STEPS, -1).mean(dim=2)
    return steps[:, :, None].repeat(1, 1, 96)


def test_place_puts_the_clip_in_the_last_second():
    clip = np.arange(1, 12001, dtype=np.int16)  # shorter than a second
    x = embed_cache.place(clip)
    assert x.shape == (CONTEXT_SAMPLES,)
    assert not x[:16000].any()
    assert (x[16000:28000] == clip).all() and not x[28000:].any()
    long = np.ones(20000, dtype=np.int16)
    assert embed_cache.place(long)[16000:].sum() == 16000  # only the first second kept


@pytest.fixture
def clip_folder(tmp_path):
    data = tmp_path / "data"
    for word, value in (("yes", 1000), ("bed", -500), ("_background_noise_", 7)):
        for i in range(5):
            write_wav(str(data / word / f"s{i}_nohash_0.wav"), np.full(16000, value + i, dtype=np.int16))
    (data / "validation_list.txt").write_text("yes/s0_nohash_0.wav\nbed/s0_nohash_0.wav\n")
    (data / "testing_list.txt").write_text("yes/s1_nohash_0.wav\n")
    return str(data)


def test_split_clips_keeps_splits_apart_and_caps_folders(clip_folder):
    train = embed_cache.split_clips(clip_folder, "training")
    assert "yes/s1_nohash_0.wav" not in train and "yes/s0_nohash_0.wav" not in train
    assert not any(r.startswith("_background_noise_") for r in train)
    assert len(train) == 4 + 3
    assert embed_cache.split_clips(clip_folder, "validation") == ["bed/s0_nohash_0.wav", "yes/s0_nohash_0.wav"]
    capped = embed_cache.split_clips(clip_folder, "training", max_per_folder=2, seed=1)
    assert sorted(r.split("/")[0] for r in capped) == ["bed", "bed", "yes", "yes"]
    assert capped == embed_cache.split_clips(clip_folder, "training", max_per_folder=2, seed=1)


def test_embed_clips_writes_shards_and_resumes(clip_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(embed_cache, "SHARD", 3)
    rels = embed_cache.split_clips(clip_folder, "training")
    out = str(tmp_path / "cache")
    assert embed_cache.embed_clips(fake_embed, clip_folder, rels, out, batch=2, log=lambda *a, **k: None) == 3
    emb, folders, paths = embed_cache.load_cache(out)
    assert list(paths) == rels and list(folders) == [r.split("/")[0] for r in rels]
    assert emb.shape == (len(rels), N_STEPS, 96)
    first = rels.index("bed/s2_nohash_0.wav")
    # the clip (value -498) fills the last 8 steps; the first 8 are the second of zeros
    assert np.allclose(emb[first, :8], 0) and np.allclose(emb[first, 8:], -498)
    os.remove(os.path.join(out, "shard-00001.npz"))
    assert embed_cache.embed_clips(fake_embed, clip_folder, rels, out, log=lambda *a, **k: None) == 1
    assert (embed_cache.load_cache(out)[0] == emb).all()


def test_embed_clips_refuses_a_wrong_shape(clip_folder, tmp_path):
    with pytest.raises(ValueError, match="not \\[batch, 16, 96\\]"):
        embed_cache.embed_clips(lambda a: fake_embed(a)[:, :3], clip_folder, ["yes/s2_nohash_0.wav"],
                                str(tmp_path / "c"), log=lambda *a, **k: None)


def test_scores_count_as_evaluate_does():
    labels = head.LABELS
    yes, no, unk, sil = (labels.index(w) for w in ("yes", "no", "_unknown_", "_silence_"))
    truth = [yes, yes, yes, no, unk, unk, unk, unk]
    pred = [yes, yes, unk, yes, unk, sil, no, unk]
    r = head.scores(pred, truth)
    assert r["per_label"] == {"yes": 2 / 3, "no": 0.0, "_unknown_": 0.5}
    assert r["keyword_accuracy"] == 2 / 4
    assert r["rejected"] == {"_unknown_": 3 / 4}  # called _silence_ is rejected too
    assert r["confusion"][yes][unk] == 1 and r["clips"] == 8
    assert head.selection_key(r) == pytest.approx((2 / 3 + 0 + 0.5) / 3)


def test_labelled_maps_folders_to_the_model_labels():
    emb = np.zeros((4, N_STEPS, 96), np.float32)
    _, y = head.labelled(emb, np.array(["go", "bed", "_silence_", "_background_noise_"]))
    assert [head.LABELS[i] for i in y] == ["go", "_unknown_", "_silence_"]


def blobs(n_per_label, rng, spread=0.3):
    """Embeddings with one mean per label plus noise: separable."""
    means = rng.standard_normal((len(head.LABELS), N_STEPS, 96)).astype(np.float32)
    y = np.repeat(np.arange(len(head.LABELS)), n_per_label)
    x = means[y] + spread * rng.standard_normal((len(y), N_STEPS, 96)).astype(np.float32)
    return x, y, means


def blobs_and_validation(rng):
    x, y, means = blobs(20, rng)
    vy = np.repeat(np.arange(len(head.LABELS)), 5)
    vx = means[vy] + 0.3 * rng.standard_normal((len(vy), N_STEPS, 96)).astype(np.float32)
    return x, y, vx, vy


def test_head_learns_separable_embeddings_and_keeps_the_best(tmp_path):
    torch.set_num_threads(1)
    x, y, vx, vy = blobs_and_validation(RNG)
    out = str(tmp_path / "run")
    best = head.train(x, y, vx, vy, out, steps=60, batch=32, eval_every=20, log=lambda *a, **k: None)
    history = json.load(open(os.path.join(out, "history.json")))
    assert best["key"] == max(h["key"] for h in history) and best["key"] > 0.9
    model, ck = head.load_head(os.path.join(out, "best.pt"))
    assert ck["step"] == best["step"]
    assert head.selection_key(head.scores(head.predict(model, vx).argmax(axis=1), vy)) == pytest.approx(best["key"])


def test_head_cannot_learn_shuffled_labels(tmp_path):
    torch.set_num_threads(1)
    x, y, vx, vy = blobs_and_validation(RNG)  # the same means: a head that learned would pass
    best = head.train(x, RNG.permutation(y), vx, vy, str(tmp_path / "r"), steps=60, batch=32, eval_every=20,
                      log=lambda *a, **k: None)
    assert best["key"] < 0.4  # chance is 1/12


def test_balanced_draw_gives_each_label_its_share():
    y = np.array([0] * 1000 + [1] * 10 + [2] * 90)
    drawn = y[head.balanced_draw(y, 12, np.random.default_rng(0), 3000)]
    assert all(abs(np.mean(drawn == k) - 1 / 3) < 0.05 for k in range(3))


def test_head_keeps_an_early_step_when_validation_gets_worse(tmp_path):
    torch.set_num_threads(1)
    x, y, vx, vy = blobs_and_validation(RNG)
    wrong = (vy + 1) % len(head.LABELS)  # validation that says the opposite of training: learning hurts it
    out = str(tmp_path / "r")
    best = head.train(x, y, vx, wrong, out, steps=60, batch=32, eval_every=5, log=lambda *a, **k: None)
    history = json.load(open(os.path.join(out, "history.json")))
    first_best = next(h for h in history if h["key"] == max(g["key"] for g in history))
    assert best["step"] == first_best["step"] < 60  # the first of the best, not the last step
    assert head.load_head(os.path.join(out, "best.pt"))[1]["step"] == best["step"]


def embedding_like_graph(time_pads=(0, 0)):
    """A small graph shaped as the teacher's embedding graph: input windows [B, 76, 32, 1]
    reshaped, a convolution of stride 8 frames and reach 76, one over the 32 bands, reshaped to
    [B, 1, 1, 96]. With time_pads the first convolution pads time, and a pass over the whole
    melspectrogram no longer equals the windows."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from mega_kws_tools.teacher import graph
    w1 = RNG.standard_normal((4, 1, 76, 1)).astype(np.float32) / 8
    w2 = RNG.standard_normal((96, 4, 1, 32)).astype(np.float32) / 8
    weights = [numpy_helper.from_array(v, n) for v, n in (
        (w1, "w1"), (w2, "w2"), (np.array([-1, 1, 76, 32], np.int64), "in_shape"),
        (np.array([-1, 1, 1, 96], np.int64), "out_shape"))]
    nodes = [helper.make_node("Reshape", ["input_1", "in_shape"], ["x"]),
             helper.make_node("Conv", ["x", "w1"], ["h"], kernel_shape=[76, 1], strides=[8, 1],
                              pads=[time_pads[0], 0, time_pads[1], 0]),
             helper.make_node("LeakyRelu", ["h"], ["r"], alpha=0.2),
             helper.make_node("Conv", ["r", "w2"], ["y"], kernel_shape=[1, 32]),
             helper.make_node("Reshape", ["y", "out_shape"], ["out"])]
    model = helper.make_model(helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, [None, 76, 32, 1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, 1, 1, 96])], weights),
        opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    return graph.from_proto(model.graph)


class StubTeacher:
    """Teacher's embedding half over a small graph; the melspectrogram a fixed function of the audio."""

    def __init__(self, g):
        from mega_kws_tools.teacher import torch_port
        self.embedding = torch_port.PortedGraph(g)

    def melspectrogram(self, audio):
        frames = (audio.shape[1] - 512) // 160 + 1
        return torch.stack([audio[:, i * 160:i * 160 + 512].reshape(audio.shape[0], 32, 16).std(dim=2)
                            for i in range(frames)], dim=1) / 1000

    def __call__(self, audio):
        from mega_kws_tools.teacher.features import Teacher
        return Teacher.embed(self, self.melspectrogram(audio))


def test_one_pass_equals_the_windows_only_when_time_is_unpadded():
    audio = torch.from_numpy(RNG.standard_normal((3, CONTEXT_SAMPLES)).astype(np.float32) * 3000)
    teacher = StubTeacher(embedding_like_graph())
    fast = embed_cache.StepEmbedder(teacher)
    assert fast(audio).shape == (3, N_STEPS, 96)
    assert embed_cache.check_steps(fast, teacher, audio) < 1e-5
    padded = StubTeacher(embedding_like_graph(time_pads=(4, 4)))
    with pytest.raises(ValueError, match="differ from the windowed"):
        embed_cache.check_steps(embed_cache.StepEmbedder(padded), padded, audio)


def test_compare_reads_both_results_the_same_way(tmp_path, capsys):
    from mega_kws_tools.teacher import compare
    labels = head.LABELS
    yes, unk, sil = labels.index("yes"), labels.index("_unknown_"), labels.index("_silence_")
    truth = [yes, yes, yes, unk, unk, unk]
    bundled = {"clips": head.scores([yes, unk, unk, unk, yes, sil], truth)}  # evaluate.py's file: under "clips"
    mine = head.scores([yes, yes, yes, unk, unk, unk], truth)
    # an other word called _silence_ is rejected too
    assert compare.figures(bundled["clips"]) == {"yes": (1, 3), "keywords": (1, 3), "rejected": (2, 3)}
    bundled["clips"]["keywords_at_rejection"] = {"0.90": {"keyword_accuracy": 0.5, "unknown_bias": -1.0}, "0.95": None}
    mine["keywords_at_rejection"] = {"0.90": {"keyword_accuracy": 0.75, "unknown_bias": 2.0}, "0.95": None}
    paths = [str(tmp_path / n) for n in ("a.json", "b.json", "c.json")]
    for p, r in zip(paths, (bundled, mine, head.scores([yes], [yes]))):
        json.dump(r, open(p, "w"))
    compare.main(["--judge", "real", paths[0], paths[1]])
    out = capsys.readouterr().out
    assert "| **real: keywords right** | 33.3% (1/3) | 100.0% (3/3) |" in out
    assert "| **real: non-keywords rejected** | 66.7% (2/3) | 100.0% (3/3) |" in out
    assert "are rejected (a bias on _unknown_, analysis only) | 50.0% (bias -1.00) | 75.0% (bias +2.00) |" in out
    assert ">= 95%" not in out  # a level neither reaches has no row
    with pytest.raises(SystemExit, match="do not count the same clips"):
        compare.main(["--judge", "real", paths[0], paths[2]])


def test_balanced_draw_gives_unknown_its_share():
    unk = len(head.LABELS) - 1
    y = np.array([0] * 1000 + [1] * 10 + [unk] * 50)
    drawn = y[head.balanced_draw(y, len(head.LABELS), np.random.default_rng(0), 4000, unknown_share=0.5)]
    assert abs(np.mean(drawn == unk) - 0.5) < 0.04
    assert abs(np.mean(drawn == 0) - 0.25) < 0.04 and abs(np.mean(drawn == 1) - 0.25) < 0.04


def test_eval_pools_several_caches(clip_folder, tmp_path, capsys):
    torch.set_num_threads(1)
    x, y, vx, vy = blobs_and_validation(RNG)
    run = str(tmp_path / "run")
    head.train(x, y, vx, vy, run, steps=5, batch=16, eval_every=5, log=lambda *a, **k: None)
    caches = []
    for split in ("training", "validation"):
        caches.append(str(tmp_path / split))
        embed_cache.embed_clips(fake_embed, clip_folder, embed_cache.split_clips(clip_folder, split), caches[-1],
                                log=lambda *a, **k: None)
    out = str(tmp_path / "eval.json")
    head.main(["eval", "--checkpoint", os.path.join(run, "best.pt"), "--cache", caches[0], "--cache", caches[1],
               "--json-out", out])
    r = json.load(open(out))
    assert r["clips"] == 7 + 2 and r["label_clips"] == {"yes": 3 + 1, "_unknown_": 4 + 1}
    assert set(r["keywords_at_rejection"]) == {"0.70", "0.80", "0.90", "0.95"}

# SPDX-License-Identifier: Apache-2.0
"""Distillation from the teacher classifier (issue 83 item 4a): the teacher's
logits keyed by clip (mega_kws_tools.teacher.targets), found again for a
training run's clips, the distillation term, and which rows of a batch it
applies to."""

import os
import wave

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.teacher import head as head_mod
from mega_kws_tools.teacher import targets
from mega_kws_tools.training import distill
from mega_kws_tools.training.config import parse

SR = 16000


def write_wav(path, samples):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(SR)
        w.writeframes(np.asarray(samples, dtype=np.int16).tobytes())


def folder(root, words, seed, noise=True):
    """A Speech Commands-layout folder: one clip a word (a tone at the word's index), and
    a _background_noise_ file, so Dataset adds _silence_ crops to it."""
    rng = np.random.default_rng(seed)
    for i, w in enumerate(words):
        write_wav(os.path.join(root, w, f"{seed:04d}_nohash_0.wav"),
                  3000 * np.sin(np.arange(SR) * (i + 1) * 0.01) + seed)
    if noise:
        write_wav(os.path.join(root, "_background_noise_", "n.wav"), rng.normal(0, 800, 3 * SR))
    return str(root)


def test_paths_stay_one_per_clip_when_silence_crops_come_before_an_extended_folder(tmp_path):
    ds = Dataset(folder(tmp_path / "a", ["yes", "no"], 1), "kws12", "training")
    ds.extend(Dataset(folder(tmp_path / "b", ["up", "go"], 2), "kws12", "training"))
    assert len(ds.paths) == len(ds.y)
    for p, y, audio in zip(ds.paths, ds.y, ds.audio):
        if p:  # each clip's path names its word's folder and holds its audio
            assert os.path.basename(os.path.dirname(p)) == ds.labels[y]
            with wave.open(p) as w:
                assert np.array_equal(np.frombuffer(w.readframes(SR), np.int16), audio)
        else:
            assert ds.labels[y] == "_silence_"


def fake_cache(cache, rels, seed):
    rng = np.random.default_rng(seed)
    os.makedirs(cache)
    emb = rng.normal(size=(len(rels), head_mod.N_STEPS, head_mod.N_EMBEDDING)).astype(np.float16)
    np.savez(os.path.join(cache, "shard-00000.npz"), rel=np.array(rels),
             folder=np.array([r.split("/")[0] for r in rels]), emb=emb)
    return emb.astype(np.float32)


def saved_head(path, labels):
    torch.manual_seed(0)
    model = head_mod.Head(len(labels), 16, 0.0).eval()
    torch.save({"state": model.state_dict(), "labels": list(labels), "config": {"width": 16, "dropout": 0.0}}, path)
    return model


def test_targets_are_the_heads_logits_found_by_path_in_the_runs_label_order(tmp_path):
    data = folder(tmp_path / "a", ["yes", "no", "up"], 3, noise=False)
    rels = [f"{w}/0003_nohash_0.wav" for w in ("yes", "no", "up")]
    emb = fake_cache(tmp_path / "cache", rels[:2], 5)  # "up" has no teacher answer
    labels = head_mod.LABELS
    model = saved_head(tmp_path / "head.pt", labels)
    out = str(tmp_path / "t.npz")
    assert targets.write_targets(str(tmp_path / "head.pt"), [(str(tmp_path / "cache"), data)], out, log=lambda m: None) == 2
    run_labels = list(reversed(labels))  # another order than the teacher's
    # the run spells the folder another way (a link): still found
    os.symlink(data, tmp_path / "link")
    paths = [os.path.join(tmp_path / "link", r) for r in rels] + [""]
    got, found = targets.load_targets(out, run_labels, paths)
    assert found == 2 and np.isnan(got[2:]).all() and not np.isnan(got[:2]).any()
    with torch.no_grad():
        want = model(torch.from_numpy(emb)).numpy()
    order = [labels.index(l) for l in run_labels]
    assert np.allclose(got[:2], want[:, order], atol=1e-5)
    with pytest.raises(ValueError, match="no label"):
        targets.load_targets(out, labels + ["bed"], paths)


def test_distill_loss_is_0_when_the_student_agrees_and_reads_only_the_kept_rows():
    torch.manual_seed(1)
    teacher = torch.randn(6, 12)
    student = teacher.clone().requires_grad_(True)
    rows = torch.tensor([True, True, False, True, False, True])
    assert distill.distill_loss(student, teacher, rows, 2.0).abs() < 1e-6
    other = torch.randn(6, 12)
    loss = distill.distill_loss(other, teacher, rows, 2.0)
    kl = F.kl_div(F.log_softmax(other[rows] / 2, 1), F.log_softmax(teacher[rows] / 2, 1), log_target=True,
                  reduction="batchmean")
    assert loss > 0 and torch.isclose(loss, 4 * kl, rtol=1e-5)
    moved = other.clone()
    moved[~rows] += 5.0  # rows left out change nothing
    assert torch.equal(distill.distill_loss(moved, teacher, rows, 2.0), loss)
    assert distill.distill_loss(other, teacher, torch.zeros(6, dtype=torch.bool), 2.0) == 0


def test_rows_without_a_teacher_answer_or_no_longer_their_clip_are_left_out():
    teacher = torch.zeros(4, 12)
    teacher[1] = float("nan")
    drawn = torch.tensor([3, 3, 5, -1])  # row 3 replaced by a hard example
    y = torch.tensor([3, 3, 11, 3])      # row 2 spliced into _unknown_
    assert distill.kept_rows(teacher, drawn, y).tolist() == [True, False, False, False]


def test_distill_options_go_together():
    base = ["--data", "D", "--out", "O"]
    with pytest.raises(SystemExit):
        parse(base + ["--distill", "1"])
    with pytest.raises(SystemExit):
        parse(base + ["--teacher-targets", "t.npz"])
    with pytest.raises(SystemExit):
        parse(base + ["--teacher-targets", "t.npz", "--distill", "1", "--distill-temperature", "0"])
    cfg = parse(base + ["--teacher-targets", "t.npz", "--distill", "0.5"])
    assert cfg.distill == 0.5 and cfg.distill_temperature == 2.0


def test_a_short_run_trains_with_the_teachers_logits(dataset, tmp_path, capsys):
    from mega_kws_tools.training import loop
    train = Dataset(dataset, "kws12", "training")
    rng = np.random.default_rng(4)
    keys = [targets.clip_key(p) for p in train.paths if p]
    out = str(tmp_path / "t.npz")
    np.savez(out, keys=np.array(keys), logits=rng.normal(size=(len(keys), 12)).astype(np.float32),
             labels=np.array(train.labels))
    cfg = parse(["--data", dataset, "--out", str(tmp_path / "run"), "--preset", "smoke", "--steps", "4",
                 "--batch", "8", "--warmup", "1", "--eval-every", "2", "--threads", "1",
                 "--teacher-targets", out, "--distill", "1"])
    assert loop.run(cfg) == 0
    text = capsys.readouterr().out
    assert f"distillation: the teacher's logits for {len(keys)} of {len(train)} training clips" in text
    assert os.path.exists(tmp_path / "run" / "best.pt")
    # a file that holds none of the run's clips stops the run with one message
    np.savez(out, keys=np.array(["/nowhere.wav"]), logits=np.zeros((1, 12), np.float32), labels=np.array(train.labels))
    with pytest.raises(loop.RunError, match="none of the"):
        loop.run(cfg)


def test_unlabeled_windows_are_slices_of_the_recordings_drawn_over_every_position():
    from mega_kws_tools.teacher import unlabeled
    rng = np.random.default_rng(6)
    recs = [rng.integers(-3000, 3000, n).astype(np.int16) for n in (3 * SR, SR, 2 * SR, 5 * SR)]
    audio, source = unlabeled.cut_windows(recs, 400, np.random.default_rng(1))
    assert audio.shape == (400, 2 * SR) and audio.dtype == np.int16
    for a, (k, offset) in zip(audio, source):
        assert len(recs[k]) >= 2 * SR and np.array_equal(a, recs[k][offset:offset + 2 * SR])
    per = np.bincount([k for k, _ in source], minlength=4)
    assert per[1] == 0 and per[2] <= 3 and per[3] > per[0] > 0  # by positions: 0, 1, 48001 and 16001
    again, _ = unlabeled.cut_windows(recs, 400, np.random.default_rng(1))
    assert np.array_equal(audio, again)
    with pytest.raises(ValueError, match="long"):
        unlabeled.cut_windows([recs[1]], 3, rng)


def test_window_logits_are_the_heads_answer_on_the_embedded_windows():
    from mega_kws_tools.teacher import unlabeled
    torch.manual_seed(2)
    model = head_mod.Head(12, 16, 0.0).eval()
    proj = torch.randn(2 * SR, 16 * 96) * 1e-4

    def embed(audio):  # a stand-in embedding: any fixed map of the two seconds
        return (audio @ proj).reshape(len(audio), 16, 96)
    audio = np.random.default_rng(3).integers(-2000, 2000, (5, 2 * SR)).astype(np.int16)
    got = unlabeled.window_logits(embed, model, audio, batch=2)
    with torch.no_grad():
        want = model(embed(torch.from_numpy(audio.astype(np.float32)))).numpy()
    assert got.shape == (5, 12) and np.allclose(got, want, atol=1e-5)


def unlabeled_file(path, labels, n, seed):
    from mega_kws_tools.teacher import unlabeled
    rng = np.random.default_rng(seed)
    audio = rng.integers(-2000, 2000, (n, 2 * SR)).astype(np.int16)
    logits = rng.normal(size=(n, len(labels))).astype(np.float32)
    unlabeled.write(str(path), audio, logits, labels, [(0, i) for i in range(n)], ["a.wav"])
    return audio, logits


def test_unlabeled_rows_replace_part_of_a_batch_with_no_label_and_the_teachers_answer(tmp_path):
    labels = head_mod.LABELS
    audio, logits = unlabeled_file(tmp_path / "u.npz", list(reversed(labels)), 7, 8)
    windows = distill.UnlabeledWindows([str(tmp_path / "u.npz")], labels)
    assert len(windows) == 7
    assert np.array_equal(windows.logits, logits[:, [list(reversed(labels)).index(l) for l in labels]])
    x, y = torch.zeros(64, 2 * SR), torch.full((64,), 3)
    teacher, drawn = torch.zeros(64, 12), y.clone()
    rows = windows.replace(x, y, teacher, drawn, np.random.default_rng(9), 0.5)
    assert 10 < len(rows) < 54
    kept = distill.kept_rows(teacher, drawn, y)
    for i in range(64):
        if i in rows:
            j = [k for k in range(7) if np.allclose(teacher[i].numpy(), windows.logits[k])]
            assert len(j) == 1 and y[i] == drawn[i] == distill.IGNORE and kept[i]
            said = audio[j[0]] != 0
            ratio = x[i].numpy()[said] / (audio[j[0]][said].astype(np.float32) / 32768)  # the window at one level
            assert np.allclose(ratio, ratio[0], rtol=1e-4) and 0.5 < ratio[0] < 2
        else:
            assert y[i] == 3 and not x[i].any() and not teacher[i].any()
    with pytest.raises(ValueError, match="no label"):
        distill.UnlabeledWindows([str(tmp_path / "u.npz")], labels + ["bed"])


def test_the_cross_entropy_leaves_unlabelled_rows_out():
    torch.manual_seed(3)
    logits, y = torch.randn(5, 12), torch.tensor([1, distill.IGNORE, 4, distill.IGNORE, 0])
    got = distill.labelled_cross_entropy(logits, y, 0.05)
    keep = y != distill.IGNORE
    assert torch.isclose(got, F.cross_entropy(logits[keep], y[keep], label_smoothing=0.05))
    assert distill.labelled_cross_entropy(logits, torch.full((5,), distill.IGNORE), 0.05) == 0


def test_unlabeled_needs_the_teachers_term():
    base = ["--data", "D", "--out", "O", "--unlabeled", "u.npz"]
    with pytest.raises(SystemExit):
        parse(base)
    with pytest.raises(SystemExit):
        parse(base + ["--teacher-targets", "t.npz", "--distill", "1", "--consistency", "0.5"])
    with pytest.raises(SystemExit):
        parse(base + ["--teacher-targets", "t.npz", "--distill", "1", "--unlabeled-share", "1.5"])
    cfg = parse(base + ["--teacher-targets", "t.npz", "--distill", "1"])
    assert cfg.unlabeled == ["u.npz"] and cfg.unlabeled_share == 0.2


def test_a_short_run_trains_on_unlabelled_windows(dataset, tmp_path, capsys):
    from mega_kws_tools.training import loop
    train = Dataset(dataset, "kws12", "training")
    keys = [targets.clip_key(p) for p in train.paths if p]
    out = str(tmp_path / "t.npz")
    np.savez(out, keys=np.array(keys), logits=np.zeros((len(keys), 12), np.float32), labels=np.array(train.labels))
    unlabeled_file(tmp_path / "u.npz", train.labels, 5, 10)
    cfg = parse(["--data", dataset, "--out", str(tmp_path / "run"), "--preset", "smoke", "--steps", "4",
                 "--batch", "8", "--warmup", "1", "--eval-every", "2", "--threads", "1",
                 "--teacher-targets", out, "--distill", "1", "--unlabeled", str(tmp_path / "u.npz"),
                 "--unlabeled-share", "0.5"])
    assert loop.run(cfg) == 0
    assert "unlabelled windows: 5, drawn 50% of the time" in capsys.readouterr().out
    assert os.path.exists(tmp_path / "run" / "best.pt")
    np.savez(str(tmp_path / "bad.npz"), audio=np.zeros((2, SR), np.int16), logits=np.zeros((2, 12), np.float32),
             labels=np.array(train.labels))
    cfg.unlabeled = [str(tmp_path / "bad.npz")]
    with pytest.raises(loop.RunError, match="--unlabeled"):
        loop.run(cfg)

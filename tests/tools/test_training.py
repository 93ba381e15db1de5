# SPDX-License-Identifier: Apache-2.0
"""The training loop's pieces (tools/mega_kws_tools/training and its helpers): the batch worker,
sampling, the consistency divergences, the voice adversary and the probes, weight
averaging, hard examples, and the running-mean start of --patch-norm."""

import dataclasses
import math
import os
import signal
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mega_kws_tools import model as mt
from mega_kws_tools.augment import batch
from mega_kws_tools.data import dataset as dataset_mod
from mega_kws_tools.data import layout
from mega_kws_tools.training import adversary
from mega_kws_tools.training import average
from mega_kws_tools.training import frontend_init
from mega_kws_tools.training import losses
from mega_kws_tools.training import mining
from mega_kws_tools.training import sampling
from mega_kws_tools.training import worker as worker_mod
from mega_kws_tools.training.voice_norm_check import adapted_logits, batchnorms, groups_of
from mega_kws_tools.training.voice_probe import probe_accuracy

SR = 16000


# --prefetch's worker process


@pytest.fixture
def within_60_s():
    """fails the test, instead of hanging, when it takes more than a minute"""
    def late(signum, frame):
        raise TimeoutError("still waiting after 60 s")
    old = signal.signal(signal.SIGALRM, late)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_a_failing_worker_hands_its_traceback_to_the_trainer(within_60_s):
    def draw(rng):
        v = rng.integers(1000)
        if draw.calls == 2:
            raise ValueError(f"clip {v} is broken")
        draw.calls += 1
        return torch.full((2, 3), float(v)), torch.tensor([0, 1])
    draw.calls = 0

    rng = np.random.default_rng(5)
    worker = worker_mod.BatchWorker(2, draw)
    worker.start(rng, 5)
    got = []
    try:
        with pytest.raises(RuntimeError) as e:
            for _ in range(5):
                got.append(float(worker.next(rng)[0][0, 0]))
        assert "the batch worker failed" in str(e.value) and "ValueError: clip " in str(e.value), e.value
        assert "Traceback" in str(e.value), e.value
    finally:
        worker.close()
    assert len(got) == 2, got
    # the batches that arrived are the ones drawing in this process gives
    check = np.random.default_rng(5)
    assert got == [float(check.integers(1000)) for _ in got], got


def test_a_worker_killed_while_sending_ends_the_read(within_60_s):
    # killed halfway through sending a batch (4 MB through a 64 KB pipe), the worker leaves half a
    # batch behind; reading it must end with the worker's death, not wait for the rest
    def big(rng):
        return torch.full((64, SR), float(rng.integers(1000))), torch.zeros(64, dtype=torch.long)
    rng = np.random.default_rng(5)
    worker = worker_mod.BatchWorker(2, big)
    worker.start(rng, 10)
    time.sleep(1.0)
    os.kill(worker.proc.pid, signal.SIGKILL)
    try:
        with pytest.raises(RuntimeError, match="died, exit code -9"):
            worker.next(rng)
    finally:
        worker.close()


# --consistency


def test_js_divergence_is_0_for_equal_ln2_for_sure_and_different_symmetric():
    torch.manual_seed(0)
    a, b = torch.randn(64, 12) * 3, torch.randn(64, 12) * 3
    assert abs(float(losses.js_divergence(a, a))) < 1e-6
    sure = torch.full((2, 3), -1e4)
    sure[0, 0] = sure[1, 1] = 1e4
    assert abs(float(losses.js_divergence(sure[:1], sure[1:])) - math.log(2)) < 1e-6
    assert abs(float(losses.js_divergence(a, b) - losses.js_divergence(b, a))) < 1e-6
    assert 0 < float(losses.js_divergence(a, b)) < math.log(2)


def test_keyword_js_divergence_reads_keyword_clips_and_columns_only():
    torch.manual_seed(0)
    a, b = torch.randn(64, 12) * 3, torch.randn(64, 12) * 3
    keywords = torch.tensor([True] * 10 + [False] * 2)
    y = torch.randint(0, 12, (64,))
    y[:2] = torch.tensor([3, 10])
    rows = keywords[y]
    kjs = losses.keyword_js_divergence(a, b, y, keywords)
    assert abs(float(kjs - losses.js_divergence(a[rows][:, :10], b[rows][:, :10]))) < 1e-6
    assert float(kjs) > 0
    shifted = a.clone()
    shifted[:, 10:] += 7.0  # only _unknown_ and _silence_ differ: nothing to pull together
    shifted[:, :10] += 2.0  # a shift of all keyword logits leaves their renormalized softmax alone
    assert abs(float(losses.keyword_js_divergence(a, shifted, y, keywords))) < 1e-5
    assert float(losses.keyword_js_divergence(a, b, torch.tensor([10, 11] * 32), keywords)) == 0.0


# sampling


def test_class_boost_draws_the_class_that_much_more_often():
    class Fake:
        labels = ["go", "no", "_unknown_"]
        y = np.array([0] * 5 + [1] * 20 + [2] * 50)
        source = y * 0
    plain = sampling.sampling_probabilities(Fake, 0.5)
    boosted = sampling.sampling_probabilities(Fake, 0.5, boost={"go": 2.0})

    def share(p):
        return [float(p[Fake.y == c].sum()) for c in range(3)]
    (g0, n0, u0), (g1, n1, u1) = share(plain), share(boosted)
    assert abs(g0 - 0.25) < 1e-9 and abs(n0 - 0.25) < 1e-9 and abs(u0 - 0.5) < 1e-9
    assert abs(g1 / n1 - 2.0) < 1e-9 and abs(u1 / n1 - 2.0) < 1e-9 and abs(g1 + n1 + u1 - 1.0) < 1e-9


@pytest.mark.parametrize("share", [0.0, 0.3])
def test_unknown_share_gives_the_class_shares_asked(dataset, share):
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    u = ds.labels.index("_unknown_")
    p = sampling.sampling_probabilities(ds, share)
    mass = np.array([p[ds.y == c].sum() for c in range(len(ds.labels))])
    want = np.full(len(ds.labels), 1 / len(ds.labels)) if share == 0 else np.full(len(ds.labels), 0.7 / 11)
    if share:
        want[u] = share
    assert abs(p.sum() - 1) < 1e-9 and np.allclose(mass, want), (share, mass)
    # within a class, clips are equally likely
    assert np.allclose(p[ds.y == u], p[ds.y == u][0])


@pytest.mark.parametrize("share", [None, 0.0, 0.3, 1.0])
def test_extra_share_within_classes_that_have_both_kinds(dataset, share):
    # a class without extra clips keeps its share, all of it from --data
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    extra = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    on = ds.labels.index("on")
    keep = extra.y != on
    extra.audio, extra.y = extra.audio[keep], extra.y[keep]
    ds.extend(extra)
    n = len(ds.labels)
    p = sampling.sampling_probabilities(ds, 0.0, share)
    assert abs(p.sum() - 1) < 1e-9
    for c in range(n):
        cls, ext = p[ds.y == c].sum(), p[(ds.y == c) & (ds.source == 1)].sum()
        want = 0.0 if c == on else 0.5 if share is None else share
        assert abs(cls - 1 / n) < 1e-9 and abs(ext - want / n) < 1e-9, (share, ds.labels[c], cls, ext)


def test_hard_examples_replace_rows_as_asked(tmp_path):
    labels = layout.KEYWORDS + ["_silence_", "_unknown_"]
    rng = np.random.default_rng(1)
    mined = tmp_path / "hard.npz"  # what mine_hard.py writes: 2 s windows, their labels and times
    np.savez(mined, audio=(rng.standard_normal((12, 2 * SR)) * 3000).astype(np.int16),
             labels=np.array(["_unknown_"] * 8 + ["yes", "no", "up", "go"]), times_s=np.arange(12.0))
    h = mining.HardExamples([str(mined)], labels)
    rng = np.random.default_rng(0)
    x, y = torch.zeros(8, 2 * SR), torch.full((8,), 10)
    h.replace(x, y, rng, 0.0)
    assert (y == 10).all() and (x == 0).all()
    h.replace(x, y, rng, 1.0)
    rows = h.audio.astype(np.float32)
    for i in range(8):
        # each row is one of the mined windows at some level (their correlation is 1)
        c = rows @ x[i].numpy() / (np.linalg.norm(rows, axis=1) * np.linalg.norm(x[i].numpy()) + 1e-9)
        j = int(np.argmax(c))
        assert c[j] > 0.999 and y[i] == h.y[j], (i, c[j])


# --voice-adversary


def test_voice_classes_are_voice_groups_with_real_speakers_one_class(dataset):
    class Fake:  # voice_targets reads the labels, the label and the voice of each clip
        labels = dataset_mod.Dataset(dataset, "kws12", "training").labels
        voice = np.array(["flite:kal", "flite:kal16", "festival:kal_diphone", "espeak-ng:en-us",
                          "speaker:0a1b2c3d", "speaker:99aa88bb", "", "espeak-ng:en-us"], dtype=object)
        y = np.array([0, 1, 2, 3, 4, 5, 10, 10])  # label 10: _silence_
    assert Fake.labels[10] == "_silence_", Fake.labels
    names, cls = dataset_mod.voice_targets(Fake)
    assert names == ["espeak-ng:en-us", "kal", "real"], names
    assert cls.tolist() == [1, 1, 1, 0, 2, 2, -1, -1], cls
    ds = dataset_mod.Dataset(dataset, "kws12", "training")
    names, cls = dataset_mod.voice_targets(ds)
    silence = ds.labels.index("_silence_")
    assert (cls[ds.y == silence] == -1).all() and (cls[ds.y != silence] >= 0).all() and len(names) > 1, names


def test_adversary_scale_ramps_up():
    assert [adversary.adversary_scale(0.5, 4, s) for s in range(6)] == [0, 0.125, 0.25, 0.375, 0.5, 0.5]
    assert adversary.adversary_scale(0.5, 0, 0) == 0.5


def test_the_encoder_gets_the_adversarys_gradient_reversed_and_scaled():
    # the adversary's own weights get the plain gradient, the embedding minus scale times it
    torch.manual_seed(0)
    adv = adversary.VoiceAdversary(8, ["a", "b", "c"])
    emb, target = torch.randn(5, 8, requires_grad=True), torch.tensor([0, 1, 2, 1, 0])
    F.cross_entropy(adv(emb, 0.3), target).backward()
    reversed_grad, weight_grad = emb.grad.clone(), adv.net[0].weight.grad.clone()
    emb.grad = None
    adv.zero_grad()
    F.cross_entropy(adv.net(emb), target).backward()
    assert torch.allclose(reversed_grad, -0.3 * emb.grad), "the embedding's gradient is not reversed and scaled"
    assert torch.allclose(weight_grad, adv.net[0].weight.grad), "the adversary's own gradient changed"


def test_the_linear_probe_reads_a_class_the_embedding_holds_and_not_one_it_does_not():
    g = torch.Generator().manual_seed(1)
    target = np.arange(400) % 4
    held = torch.randn(400, 6, generator=g) + 5.0 * F.one_hot(torch.from_numpy(target), 6).float()
    assert probe_accuracy(held, target) > 0.95, probe_accuracy(held, target)
    assert probe_accuracy(torch.randn(400, 6, generator=g), target) < 0.45


# voice_norm_check.py


def test_voice_norm_alpha_0_is_the_model_alpha_1_the_clips_own_statistics(dataset, model_like_trained):
    model = model_like_trained()
    ds = dataset_mod.Dataset(dataset, "kws12", "training")
    idx = np.arange(min(len(ds), 100))  # one batch of adapted_logits: its statistics are those of all these clips
    x, _ = batch.make_batch(ds, idx, np.random.default_rng(0), train=False)
    norms = batchnorms(model)
    assert norms, "no BatchNorm to adapt"
    trained = [(m.running_mean.clone(), m.running_var.clone()) for m in norms]
    with torch.no_grad():
        plain = model.window_logits(x)
    assert torch.equal(adapted_logits(model, x, norms, 0.0), plain)
    assert not torch.allclose(adapted_logits(model, x, norms, 1.0), plain), "the clips' own statistics changed nothing"
    assert all(torch.equal(m.running_mean, a) and torch.equal(m.running_var, b) and not m.training
               for m, (a, b) in zip(norms, trained)), "the model was not left as it came"
    # for the first BatchNorm: the mean and variance of its input over the clips
    first, seen = norms[0], []
    hook = first.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].detach()))
    with torch.no_grad():
        model.window_logits(x)
    hook.remove()
    inp = seen[0]  # (clips, channels, tokens)
    adapted = adapted_logits(model, x, [first], 1.0)
    first.running_mean.copy_(inp.mean(dim=(0, 2)))
    first.running_var.copy_(inp.transpose(0, 1).reshape(inp.shape[1], -1).var(dim=1, unbiased=True))
    with torch.no_grad():
        by_hand = model.window_logits(x)
    assert torch.allclose(adapted, by_hand, atol=1e-4), (adapted - by_hand).abs().max()


def test_voice_norm_groups():
    class Fake:  # the real speakers one group, or one each; a voice its own; no voice left alone
        voice = np.array(["espeak-ng:en-us", "speaker:ab12cd34", "speaker:0f0f0f0f", ""], dtype=object)
    assert list(groups_of(Fake)) == ["espeak-ng:en-us", "real:", "real:", ""], groups_of(Fake)
    assert list(groups_of(Fake, "speaker")) == ["espeak-ng:en-us", "real:ab12cd34", "real:0f0f0f0f", ""]


# --patch-norm running_mean from a checkpoint without it


def test_the_running_mean_starts_where_the_model_computes_what_the_checkpoint_did(dataset, model_like_trained):
    # the running mean starts at the training inputs' mean log power and the bias absorbs it, so
    # while the mean stays at its start (decay ~0) the model computes what the checkpoint did
    plain = model_like_trained()
    weights = plain.state_dict()
    normed = mt.MegaKWS(dataclasses.replace(plain.cfg, patch_norm="running_mean"))
    normed.load_state_dict(dict(weights, **{"embed_tokens.norm_init": torch.zeros(plain.cfg.embed_dim)}))
    ds = dataset_mod.Dataset(dataset, "kws12", "training", 0, 1)
    frontend_init.init_running_mean(normed, ds, np.random.default_rng(0), keep_function=True)
    x, _ = batch.make_batch(ds, np.arange(8), np.random.default_rng(1), train=False)
    normed.eval()
    normed.embed_tokens.norm_decay = 1e-12
    with torch.no_grad():
        a, b = plain.window_logits(x), normed.window_logits(x)
    torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    normed.embed_tokens.norm_decay = 0.01
    with torch.no_grad():
        assert float((normed.window_logits(x) - a).abs().max()) > 1e-3, "the running mean changed nothing"


# --weight-average


def test_weight_average_follows_its_formula_and_applied_restores_the_weights():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    wa = average.WeightAverage(m, 0.5)
    expect = m[0].weight.detach().clone()
    for n, c in enumerate([1.0, 2.0, 3.0, 4.0], start=1):
        with torch.no_grad():
            m[0].weight.fill_(c)
        m[1].num_batches_tracked.fill_(n)
        wa.update(m)
        d = min(0.5, (1 + n) / (10 + n))
        expect = d * expect + (1 - d) * c
    assert torch.allclose(wa.avg["0.weight"], expect), (wa.avg["0.weight"], expect)
    assert int(wa.avg["1.num_batches_tracked"]) == 4
    with wa.applied(m):
        assert torch.allclose(m[0].weight, expect)
    assert torch.all(m[0].weight == 4.0), "applied() did not restore the model's weights"

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Candidate (b) of issue 83 item 4 (tools/mega_kws_tools/teacher: student,
stream_embed) on a tiny random model and random embeddings, without the
teacher's files: shapes, the streaming posteriors equal to the offline model
on each hop's window (and not with a shorter window: the reach is needed), a
recording embedded in blocks equal to one pass, clips extended with their own
silence, and a few training steps that lower the loss."""

import numpy as np
import torch

from mega_kws_tools.model import MegaKWS, randomize_for_testing
from mega_kws_tools.teacher import head, stream_embed, student

RNG = np.random.default_rng(84)


def tiny(**options):
    cfg = student.student_config(**dict(dict(embed_dim=8, hidden_dim=12, ffn_hidden_dim=12, z_dim=4, n_dim=2,
                                             n_layers=2, classifier_dim=8), **options))
    torch.manual_seed(0)
    model = student.EmbeddingStudent(cfg).eval()
    # the layers of a MegaKWS randomized for tests: slow EMA channels and attention that matter
    layers = MegaKWS(cfg)
    randomize_for_testing(layers, 0)
    model.load_state_dict({k: v for k, v in layers.state_dict().items() if not k.startswith("embed_tokens.")},
                          strict=False)
    model.embed_tokens.set_statistics(RNG.standard_normal((50, 96)).astype(np.float32))
    return model


def test_receptive_steps_count_each_layer_back_to_a_chunk_start():
    # pooled: 4 chunks of 3 = 12 steps; layer 2 reads 5 steps before them, layer 1 from the chunk
    # start of those (6 back) 5 more: 12 + 11 = 23, a whole number of chunks: 24
    assert student.receptive_span(tiny(truncation=6).cfg) == 23
    assert student.receptive_steps(tiny(truncation=6).cfg) == 24
    assert student.receptive_steps(tiny(truncation=1, n_layers=1).cfg) == 12
    assert student.receptive_steps(tiny(truncation=4, n_layers=3).cfg) == 21


def test_shapes():
    model = tiny()
    reach = student.receptive_steps(model.cfg)
    x = torch.from_numpy(RNG.standard_normal((5, reach, 96)).astype(np.float32))
    assert model(x).shape == (5, len(head.LABELS))
    assert model.hop_logits(x).shape == (5, reach // 3, len(head.LABELS))
    p = student.stream_posteriors(model, RNG.standard_normal((101, 96)).astype(np.float32))
    assert p.shape == (33, len(head.LABELS)) and np.allclose(p.sum(axis=1), 1)


def test_stream_posteriors_equal_the_offline_model_on_each_window():
    model = tiny(truncation=5)
    emb = RNG.standard_normal((130, 96)).astype(np.float32)
    whole = student.stream_posteriors(model, emb, block_hops=10_000)
    blocks = student.stream_posteriors(model, emb, block_hops=7)  # blocks, each with its context
    windows = np.stack([student.window_posteriors(model, emb, h) for h in range(len(whole))])
    assert np.abs(whole - windows).max() < 1e-5
    assert np.abs(blocks - windows).max() < 1e-5
    # the reach is exact: its earliest step moves the hop's logits, the step before it does not
    reach, span, c = student.receptive_steps(model.cfg), student.receptive_span(model.cfg), model.cfg.chunk_size
    assert reach - c < span <= reach
    x = torch.from_numpy(emb[90 - reach - c:90].astype(np.float64))[None]
    model.double()  # float64: the real but small reach of the earliest step stands clear of the FFT's rounding
    with torch.no_grad():
        base = model(x)
        for step, moves in ((x.shape[1] - span, True), (x.shape[1] - span - 1, False)):
            y = x.clone()
            y[0, step] += 100.0
            change = float((model(y) - base).abs().max())
            assert change > 1e-12 if moves else change < 1e-14, (step, change)


def test_hop_logits_pool_as_megakws_does():
    model = tiny()
    emb = torch.from_numpy(RNG.standard_normal((1, 30, 96)).astype(np.float32))
    with torch.no_grad():
        ours = model.hop_logits(emb)[0]
        theirs = model.chunk_window_logits(model.features(emb)[0])
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_a_recording_in_blocks_equals_one_pass():
    def fake(audio):  # step k: the mean of the samples it needs, so each step sees its own span
        a = audio[0].double()
        k = stream_embed.n_steps(a.shape[0])
        spans = a.unfold(0, stream_embed.EMIT_SAMPLES, stream_embed.SAMPLES_PER_STEP)[:k]
        return spans.mean(dim=1)[None, :, None].repeat(1, 1, 96).float()
    samples = RNG.integers(-3000, 3000, 40_000).astype(np.int16)
    blocks = stream_embed.recording_embeddings(fake, samples, block_steps=4)
    whole = fake(torch.from_numpy(samples.astype(np.float32))[None])[0].numpy()
    assert blocks.shape == (stream_embed.n_steps(40_000), 96) == whole.shape
    assert np.abs(blocks - whole).max() < 1e-3


def test_extend_repeats_the_silence_before_the_clip():
    x = RNG.standard_normal((2, 16, 96)).astype(np.float32)
    e = student.extend(x, 20)
    assert e.shape == (2, 20, 96) and (e[:, 4:] == x).all() and (e[:, :4] == x[:, :1]).all()
    assert (student.extend(x, 9) == x[:, 7:]).all()


def test_batches_swap_only_the_steps_before_the_clip():
    x = np.zeros((4, 16, 96), np.float32)
    x[:, 3:] = 1.0  # the clip's steps
    x[2:] = 5.0  # two non-keyword clips: donors of context
    y = np.array([0, 1, 10, 11])
    b = student.Batches(x, y, reach=20, max_shift=0, context_share=1.0, seed=1)
    xb, yb = b.draw(64)
    keyword = (yb < 10).numpy()
    assert xb.shape == (64, 20, 96)
    assert (xb[keyword][:, -student.CLIP_STEPS:] == 1.0).all()
    assert (xb[keyword][:, :20 - student.CLIP_STEPS] == 5.0).all()


def test_a_few_training_steps_lower_the_loss(tmp_path):
    n = 240
    y = np.arange(n) % len(head.LABELS)
    x = RNG.standard_normal((n, 16, 96)).astype(np.float32)
    x[:, 3:, :len(head.LABELS)] += 3 * np.eye(len(head.LABELS), dtype=np.float32)[y][:, None]
    model = tiny()
    cfg = model.cfg
    xs = torch.from_numpy(np.ascontiguousarray(student.extend(x, student.receptive_steps(cfg))))
    torch.manual_seed(83)
    before = float(torch.nn.functional.cross_entropy(student.EmbeddingStudent(cfg).eval()(xs), torch.from_numpy(y)))
    best = student.train(x, y, x, y, str(tmp_path), cfg, steps=60, batch=32, lr=1e-2, eval_every=20,
                         log=lambda *a, **k: None)
    trained, _ = student.load_student(str(tmp_path / "best.pt"))
    with torch.no_grad():
        after = float(torch.nn.functional.cross_entropy(trained(xs), torch.from_numpy(y)))
    assert after < before - 0.5 and best["key"] > 0.5


def test_negative_windows_come_from_the_stream_as_unknown():
    x = np.zeros((4, 16, 96), np.float32)
    y = np.array([0, 1, 10, 11])
    stream = np.arange(200, dtype=np.float32)[:, None].repeat(96, axis=1)  # step k holds k
    hard = [50, 60]
    neg = student.Negatives(stream, 20, hard)
    b = student.Batches(x, y, reach=20, max_shift=0, context_share=0.0, seed=2, negatives=neg, negative_share=0.25)
    xb, yb = b.draw(64)
    rows = xb[yb == head.LABELS.index("_unknown_")]
    from_stream = [r for r in rows if r[0, 0] > 0 or r[-1, 0] > 0]
    assert len(from_stream) >= 16  # a quarter of the batch, besides the drawn _unknown_ clips
    ends = [int(r[-1, 0]) + 1 for r in from_stream]
    assert all((np.diff(r[:, 0].numpy()) == 1).all() for r in from_stream)  # whole windows, in order
    assert sum(e in hard for e in ends) >= 4  # about half end at the hard steps


def test_mine_finds_the_hops_a_model_takes_for_a_keyword():
    model = tiny()
    emb = RNG.standard_normal((60, 96)).astype(np.float32)
    p = student.stream_posteriors(model, emb)
    top = p[:, :10].max(axis=1)
    threshold = float(np.median(top))
    ends = student.mine(model, emb, threshold)
    assert list(ends) == [3 * (h + 1) for h in range(len(p)) if top[h] >= threshold]
    assert 0 < len(ends) < len(p)


def test_labelled_windows_end_just_after_each_word():
    emb = np.arange(300, dtype=np.float32)[:, None].repeat(96, axis=1)  # step k holds k
    rows = [("keyword", 4.0, 4.5, "yes"), ("unknown", 10.0, 10.4, "bed"), ("keyword_free", 12.0, 20.0, "keyword_free")]
    x, y = student.labelled_windows(emb, rows, reach=12, chunk=3, step_end=lambda k: 0.08 * (k + 1))
    ends = x[:, -1, 0].astype(int) + 1  # the step after each window's last
    assert (ends % 3 == 0).all() and (x[:, 0, 0] == ends - 12).all()
    yes = ends[y == head.LABELS.index("yes")]
    assert len(yes) and all(4.5 <= 0.08 * e <= 4.5 + 0.48 for e in yes)
    unknown = ends[y == head.LABELS.index("_unknown_")]
    assert any(10.4 <= 0.08 * e <= 10.88 for e in unknown)  # the other word
    free = [e for e in unknown if not 10.4 <= 0.08 * e <= 10.88]
    assert free and all(not 4.5 - 1.0 <= 0.08 * e <= 4.5 + 2.0 for e in free)  # never near the keyword


def test_keep_thins_only_the_named_labels_and_nests():
    from mega_kws_tools.teacher import student_run
    y = np.repeat(np.arange(12), 20)
    x = np.arange(len(y))
    keep = student_run.parse_keep(["on=0.25", "go=0"])
    on, go = head.LABELS.index("on"), head.LABELS.index("go")
    tx, ty = student_run.thin(x, y, keep)
    assert (ty == on).sum() == 5 and (ty == go).sum() == 0
    assert all((ty == l).sum() == 20 for l in range(12) if l not in (on, go))
    assert np.array_equal(ty, y[tx])  # rows stay paired
    half, _ = student_run.thin(x, y, student_run.parse_keep(["on=0.5"]))
    assert set(tx[ty == on]) < set(half[y[half] == on])  # a smaller share keeps a subset
    other, _ = student_run.thin(x, y, student_run.parse_keep(["on=0.25"]), seed=1)
    assert set(other[y[other] == on]) != set(tx[ty == on])
    for bad in ("onn=0.5", "on=1.5", "on=half", "on"):
        try:
            student_run.parse_keep([bad])
        except ValueError as e:
            assert "--keep" in str(e)
        else:
            raise AssertionError(f"{bad} was accepted")


def test_right_at_rejection_takes_the_best_bias_that_rejects_enough():
    from mega_kws_tools.teacher import real_curve
    unk, on, go = (head.LABELS.index(l) for l in ("_unknown_", "on", "go"))
    n = len(head.LABELS)
    kw = np.zeros((4, n))
    kw[:, unk] = 1.0
    kw[0, on], kw[1, on], kw[2, go], kw[3, go] = 3.0, 1.5, 2.5, 0.5  # margins over _unknown_ 2, 0.5, 1.5, -0.5
    truth = np.array([on, on, go, go])
    free = np.zeros((10, n))
    free[:, unk] = 1.0
    free[:9, go] = np.linspace(0.0, 0.8, 9)  # under _unknown_: rejected at any bias >= 0
    free[9, go] = 2.0  # one clip rejected only with a bias over 1
    right, acc, b = real_curve.right_at_rejection(kw, truth, free, level=0.9)
    assert (right["on"], right["go"], acc) == (2, 1, 0.75) and -0.2 < b < 0.5  # the most keywords at 9 of 10
    right, acc, b = real_curve.right_at_rejection(kw, truth, free, level=0.95)  # 10 of 10
    assert (right["on"], right["go"], acc) == (1, 1, 0.5) and 1.0 < b <= 1.5  # a bias over 1 drops the 0.5 margin
    assert real_curve.right_at_rejection(kw, truth, free + np.eye(n)[go] * 100, level=0.95) is None
    try:
        real_curve.right_at_rejection(kw, truth, free, level=0.85)
    except ValueError as e:
        assert "TRADEOFF_REJECTION" in str(e)
    else:
        raise AssertionError("a level rejection_tradeoff does not read was accepted")

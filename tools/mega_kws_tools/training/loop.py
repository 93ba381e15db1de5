# SPDX-License-Identifier: Apache-2.0
"""The training run of a TrainConfig: its data, model and optimizer, the start
(fresh, --resume or --init), the steps, validation and checkpoints.

run(cfg) returns the command's exit status; a setting that does not fit the
data or a checkpoint stops it with RunError's message (status 1)."""

import contextlib
import dataclasses
import json
import math
import os
import signal
import time
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from mega_kws_tools import model as mt
from mega_kws_tools.audio import read_wav, SR
from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.augment.features import SpeakerAugment
from mega_kws_tools.augment.noise import BABBLE_SNR_DB, BABBLE_WORDS
from mega_kws_tools.augment.nonspeech import KINDS as NONSPEECH_KINDS, load_recordings, RECORDED_SHARE
from mega_kws_tools.convert.loading import load_init
from mega_kws_tools.data.dataset import Dataset, voice_targets
from mega_kws_tools.data.layout import KEYWORDS
from mega_kws_tools.evaluation import streamscore, tune_detection
from mega_kws_tools.evaluation.accuracy import evaluate
from mega_kws_tools.training.adversary import adversary_scale, VoiceAdversary
from mega_kws_tools.training.average import WeightAverage
from mega_kws_tools.training.checkpoints import save, state_mismatch
from mega_kws_tools.training.config import TrainConfig
from mega_kws_tools.training.distill import distill_loss, kept_rows, labelled_cross_entropy, TeacherTargets, \
    UnlabeledWindows
from mega_kws_tools.training.frontend_init import init_logmel_bias, init_running_mean
from mega_kws_tools.training.losses import js_divergence, keyword_js_divergence, mixup, mixup_loss
from mega_kws_tools.training.mining import HardExamples
from mega_kws_tools.training.presets import PRESETS
from mega_kws_tools.training.sampling import sampling_probabilities
from mega_kws_tools.training.worker import BatchWorker, stop_on_signal


class RunError(Exception):
    """A setting that does not fit the data or a checkpoint: the message says which."""


@dataclasses.dataclass
class Data:
    train: Dataset
    val: Dataset
    hard: HardExamples
    stream: Optional[tuple]  # --val-stream: (samples, keywords, keyword-free stretches)
    p_sample: np.ndarray
    voice_names: list
    voice_class: np.ndarray
    teacher: Optional[TeacherTargets] = None  # --teacher-targets
    unlabeled: Optional[UnlabeledWindows] = None  # --unlabeled
    recordings: list = dataclasses.field(default_factory=list)  # --nonspeech-audio: int16 arrays


@dataclasses.dataclass
class Run:
    """What the steps change: the model and its optimizer, the random generators
    (batches; mixup and the front end's augmentation), the step and the best
    validation so far."""
    model: mt.MegaKWS
    opt: torch.optim.Optimizer
    adversary: Optional[VoiceAdversary]
    rng: np.random.Generator
    augment_rng: np.random.Generator
    average: Optional[WeightAverage] = None
    step: int = 0
    best: float = 0.0
    best_key: Optional[list] = None
    resumed: Optional[dict] = None


def load_clips(cfg: TrainConfig):
    """The training and validation Datasets of --data, --extra-data and --extra-val."""
    for d in [cfg.data] + cfg.extra_data + cfg.extra_val:
        if not os.path.isdir(d):
            raise RunError(f"{d}: not a folder")
    train = Dataset(cfg.data, cfg.classes, "training", cfg.max_per_class, cfg.seed)
    for d in cfg.extra_data:
        train.extend(Dataset(d, cfg.classes, "training", cfg.max_per_class, cfg.seed))
    val = Dataset(cfg.data, cfg.classes, "validation", cfg.max_per_class, cfg.seed)
    for d in cfg.extra_val:
        val.extend(Dataset(d, cfg.classes, "validation", cfg.max_per_class, cfg.seed))
    if len(train) == 0:
        raise RunError(f"no training clips found under {cfg.data}")
    return train, val


def load_stream(cfg: TrainConfig):
    """--val-stream's samples, keywords and keyword-free stretches, or None."""
    if not cfg.val_stream:
        return None
    try:
        keywords, free = streamscore.read_stream_labels(cfg.val_stream[1])
        stream = (read_wav(cfg.val_stream[0]).astype(np.float32) / 32768.0, keywords, free)
    except (OSError, ValueError, KeyError) as e:
        raise RunError(f"--val-stream: {e}") from None
    if not free:
        raise RunError(f"--val-stream: {cfg.val_stream[1]} marks no keyword-free stretch")
    return stream


def load_data(cfg: TrainConfig, t0: float) -> Data:
    train, val = load_clips(cfg)
    print(f"data: {len(train)} training, {len(val)} validation clips, labels {train.labels} "
          f"({time.time() - t0:.0f} s to load)", flush=True)
    try:
        hard = HardExamples(cfg.hard_examples, train.labels)
    except (OSError, ValueError, KeyError) as e:
        raise RunError(f"--hard-examples: {e}") from None
    stream = load_stream(cfg)
    if len(hard):
        print(f"hard examples: {len(hard)} windows, {hard.summary()}, drawn {cfg.hard_share:.0%} of the time",
              flush=True)
    boost = cfg.boosts()
    unknown_boost = sorted(set(boost) - set(train.labels))
    if unknown_boost:
        raise RunError(f"--class-boost {', '.join(unknown_boost)}: not a class of this run "
                       f"({', '.join(train.labels)})")
    p_sample = sampling_probabilities(train, cfg.unknown_share, cfg.extra_share, boost)
    voice_names, voice_class = voice_targets(train)
    if cfg.voice_adversary > 0:
        if len(voice_names) < 2:
            raise RunError(f"--voice-adversary: the training clips have {len(voice_names)} voice(s) "
                           f"known by name, need 2 or more")
        print(f"voice adversary: weight {cfg.voice_adversary:g} (reached at step "
              f"{cfg.voice_adversary_ramp}), {len(voice_names)} voice classes over "
              f"{int((voice_class >= 0).sum())} clips", flush=True)
    teacher = None
    if cfg.teacher_targets:
        try:
            teacher = TeacherTargets(cfg.teacher_targets, train.labels, train.paths)
        except (OSError, ValueError, KeyError) as e:
            raise RunError(f"--teacher-targets: {e}") from None
        if not teacher.found:
            raise RunError(f"--teacher-targets {cfg.teacher_targets}: none of the {len(train)} training clips is in it")
        print(f"distillation: the teacher's logits for {teacher.found} of {len(train)} training clips, weight "
              f"{cfg.distill:g}, temperature {cfg.distill_temperature:g}", flush=True)
    try:
        recordings = load_recordings(cfg.nonspeech_audio)
    except (OSError, ValueError) as e:
        raise RunError(f"--nonspeech-audio: {e}") from None
    if recordings:
        minutes = sum(map(len, recordings)) / SR / 60
        print(f"recorded non-speech: {len(recordings)} recordings, {minutes:.1f} min, "
              f"{RECORDED_SHARE:.0%} of the non-speech negatives", flush=True)
    return Data(train, val, hard, stream, p_sample, voice_names, voice_class, teacher, load_unlabeled(cfg, train),
                recordings)


def load_unlabeled(cfg: TrainConfig, train: Dataset) -> Optional[UnlabeledWindows]:
    """--unlabeled's windows, or None."""
    if not cfg.unlabeled:
        return None
    try:
        unlabeled = UnlabeledWindows(cfg.unlabeled, train.labels)
    except (OSError, ValueError, KeyError) as e:
        raise RunError(f"--unlabeled: {e}") from None
    if not len(unlabeled):
        raise RunError(f"--unlabeled {' '.join(cfg.unlabeled)}: no windows")
    print(f"unlabelled windows: {len(unlabeled)}, drawn {cfg.unlabeled_share:.0%} of the time, taught by the "
          f"teacher's term alone", flush=True)
    return unlabeled


def views(cfg: TrainConfig) -> int:
    return 2 if cfg.consistency > 0 else 1  # --consistency: two augmented views of each drawn clip


def make_drawer(cfg: TrainConfig, data: Data):
    """draw(rng): the next training batch (x, y, voice class per clip), drawn from rng."""
    n_views = views(cfg)
    nonspeech_weights = cfg.nonspeech_kind_weights()  # parsed once, not per batch

    def draw(rng: np.random.Generator):
        idx = rng.choice(len(data.train), size=cfg.batch // n_views, p=data.p_sample)
        xs, ys = zip(*(make_batch(data.train, idx, rng, train=True, noise_prob=cfg.noise_prob,
                                  speed_prob=cfg.speed_prob, splice_prob=cfg.splice_prob,
                                  color_prob=cfg.color_prob, vowel_prob=cfg.vowel_prob,
                                  pitch_prob=cfg.pitch_prob, babble_prob=cfg.babble_prob,
                                  speed_range=tuple(cfg.speed_range), nonspeech=cfg.nonspeech_negatives,
                                  recordings=data.recordings,
                                  nonspeech_weights=nonspeech_weights)
                         for _ in range(n_views)))
        x, y = torch.cat(xs), torch.cat(ys)
        drawn_y = torch.from_numpy(np.tile(data.train.y[idx], n_views))
        if len(data.hard):
            drawn_y[data.hard.replace(x, y, rng, cfg.hard_share)] = -1  # no longer the drawn clip
        voice = torch.from_numpy(np.tile(data.voice_class[idx], n_views))
        if data.teacher is None:
            return x, y, voice
        teacher = data.teacher.rows(idx, n_views)
        if data.unlabeled is not None:
            voice[data.unlabeled.replace(x, y, teacher, drawn_y, rng, cfg.unlabeled_share)] = -1
        return x, y, voice, teacher, drawn_y
    return draw


def build(cfg: TrainConfig, data: Data) -> Run:
    """The model of the preset, its optimizer (and the voice adversary's), fresh."""
    mcfg = mt.MegaConfig(**PRESETS[cfg.preset], n_classes=len(data.train.labels), bidirectional=False,
                         patch_norm=cfg.patch_norm, patch_norm_decay=cfg.patch_norm_decay)
    try:
        model = mt.MegaKWS(mcfg)
    except ValueError as e:
        raise RunError(f"preset {cfg.preset}: {e}") from None
    # Adam moves every weight by about lr per step, whatever its size: the front-end
    # filters (about 0.01 each) get a proportionally smaller rate, or the first
    # steps would wipe out their filterbank initialization.
    if mcfg.patch_features == "logpower":
        front = [p for n, p in model.named_parameters() if n == "embed_tokens.weight"]
        rest = [p for n, p in model.named_parameters() if n != "embed_tokens.weight"]
        groups = [{"params": rest, "lr_scale": 1.0}, {"params": front, "lr_scale": cfg.frontend_lr_scale}]
    else:
        groups = [{"params": list(model.parameters()), "lr_scale": 1.0}]  # one group, as older checkpoints have
    adversary = None
    if cfg.voice_adversary > 0:
        adversary = VoiceAdversary(mcfg.embed_dim, data.voice_names)
        groups.append({"params": list(adversary.parameters()), "lr_scale": VoiceAdversary.LR_SCALE})
    opt = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return Run(model, opt, adversary, np.random.default_rng(cfg.seed), np.random.default_rng(cfg.seed + 1))


def resume(cfg: TrainConfig, run: Run, data: Data, last: str):
    """Continues from last.pt: weights, optimizer, step, best and random states."""
    ck = torch.load(last, map_location="cpu")
    why = state_mismatch(run.model, ck["model"])
    if why:
        raise RunError(f"--resume {last} does not fit this run's flags (preset {cfg.preset}): {why}")
    run.model.load_state_dict(ck["model"])
    if run.adversary is not None:
        saved = ck.get("voice_adversary")
        if saved is None or saved["names"] != data.voice_names:
            raise RunError(f"--resume {last}: "
                           f"{'no voice adversary in it' if saved is None else 'its voice adversary has other voices'}"
                           f"; resume with the flags it was made with")
        run.adversary.load_state_dict(saved["state"])
    elif "voice_adversary" in ck:
        raise RunError(f"--resume {last} was made with --voice-adversary; resume with it")
    run.opt.load_state_dict(ck["optimizer"])
    run.step, run.best = ck["step"], ck["best_val"]
    # older checkpoints kept the best validation accuracy, without a key
    run.best_key = ck.get("best_key") or (None if cfg.val_stream else [run.best])
    run.rng.bit_generator.state = ck["rng"]
    if "augment_rng" in ck:  # older checkpoints restart it
        run.augment_rng.bit_generator.state = ck["augment_rng"]
    run.resumed = ck
    print(f"resumed at step {run.step} (best validation accuracy {run.best:.4f})", flush=True)


def init_from(cfg: TrainConfig, run: Run, data: Data):
    """--init: another checkpoint's weights, with a fresh optimizer and schedule."""
    ck = load_init(cfg.init)
    if ck is None:
        raise RunError(None)  # load_init said why
    if ck.get("labels") != data.train.labels:
        raise RunError(f"{cfg.init} has labels {ck.get('labels')}, this run {data.train.labels}")
    model = run.model
    weights = dict(ck["model"])
    fresh_norm = model.cfg.patch_norm != "none" and "embed_tokens.norm_init" not in weights
    if fresh_norm:  # a checkpoint without the normalization: start it where it changes nothing yet
        weights["embed_tokens.norm_init"] = model.embed_tokens.norm_init.detach()
    why = state_mismatch(model, weights)
    if why:
        raise RunError(f"--init {cfg.init} does not fit preset {cfg.preset}: {why}")
    model.load_state_dict(weights)
    if fresh_norm:
        init_running_mean(model, data.train, np.random.default_rng(cfg.seed + 2), keep_function=True)
    val_acc = ck.get("best_val")
    print(f"initialized from {cfg.init} (its step {ck.get('step')}, validation accuracy "
          f"{'unknown' if val_acc is None else f'{val_acc:.4f}'})", flush=True)


def start(cfg: TrainConfig, run: Run, data: Data, last: str):
    """Where the weights start: last.pt (--resume), --init, or fresh (the front
    end's starting values from the training clips); then the weight average."""
    mcfg = run.model.cfg
    if cfg.resume and os.path.exists(last):
        resume(cfg, run, data, last)
    elif cfg.init:
        init_from(cfg, run, data)
    elif mcfg.patch_norm != "none":
        init_running_mean(run.model, data.train, np.random.default_rng(cfg.seed + 2), keep_function=False)
    elif mcfg.patch_features == "logmel":
        init_logmel_bias(run.model, data.train, np.random.default_rng(cfg.seed + 2))
    if cfg.weight_average is not None:
        run.average = WeightAverage(run.model, cfg.weight_average)
        if run.resumed is not None and "weight_average" in run.resumed:
            try:
                run.average.load_state_dict(run.resumed["weight_average"])
            except ValueError as e:
                raise RunError(f"{last}: {e}") from None
        print(f"weight average: decay {cfg.weight_average}, {run.average.n} updates so far", flush=True)


def describe(cfg: TrainConfig, run: Run):
    n_params = sum(p.numel() for p in run.model.parameters())
    print(f"model: {n_params} parameters, config {json.dumps(dataclasses.asdict(run.model.cfg))}", flush=True)
    print(f"label smoothing {cfg.label_smoothing}", flush=True)
    if cfg.mixup_prob > 0:
        print(f"mixup: {cfg.mixup_prob:g} of the clips, lam ~ Beta({cfg.mixup_alpha:g}) folded to >= 0.5",
              flush=True)
    if cfg.babble_prob > 0:
        print(f"babble: {cfg.babble_prob:g} of the noise, {BABBLE_WORDS[0]}-{BABBLE_WORDS[1]} _unknown_ words at "
              f"{BABBLE_SNR_DB[0]:g}..{BABBLE_SNR_DB[1]:g} dB", flush=True)
    if cfg.nonspeech_negatives > 0:
        weights = cfg.nonspeech_kind_weights()
        kinds = "" if weights is None else \
            " (" + ", ".join(f"{k} {w:.0%}" for k, w in zip(NONSPEECH_KINDS, weights)) + ")"
        print(f"non-speech negatives: {cfg.nonspeech_negatives:g} of the examples{kinds}, labelled _silence_",
              flush=True)
    if cfg.speed_prob > 0 or cfg.warp_prob > 0:
        print(f"speed factors {cfg.speed_range[0]:g}-{cfg.speed_range[1]:g} (p {cfg.speed_prob:g}), "
              f"warp factors {cfg.warp_range[0]:g}-{cfg.warp_range[1]:g} (p {cfg.warp_prob:g})", flush=True)


def step_loss(cfg: TrainConfig, run: Run, batch: tuple, keyword_mask, counts: list):
    """The loss of one batch (draw's tuple): cross-entropy (or mixup's), the
    consistency of two views, the teacher's distillation term, the voice
    adversary's; counts[0:2] gathers the adversary's hits and tries."""
    x, y, voice = batch[:3]
    if cfg.mixup_prob > 0:  # drawn from augment_rng, in this process: --resume restores it
        x, partner_y, lam = mixup(x, y, run.augment_rng, cfg.mixup_prob, cfg.mixup_alpha)
    embedding = run.model.window_embedding(x)
    logits = run.model.head(embedding)
    if cfg.mixup_prob > 0:
        loss = mixup_loss(logits, y, partner_y, lam, cfg.label_smoothing)
    else:
        loss = labelled_cross_entropy(logits, y, cfg.label_smoothing)
    if views(cfg) == 2:
        a, b = logits.chunk(2)
        divergence = (keyword_js_divergence(a, b, y[:len(a)], keyword_mask)
                      if cfg.consistency_scope == "keywords" else js_divergence(a, b))
        loss = loss + cfg.consistency * divergence
    if cfg.distill > 0:
        teacher, drawn_y = batch[3:]
        loss = loss + cfg.distill * distill_loss(logits, teacher, kept_rows(teacher, drawn_y, y),
                                                 cfg.distill_temperature)
    voiced = voice >= 0
    if run.adversary is not None and bool(voiced.any()):
        scale = adversary_scale(cfg.voice_adversary, cfg.voice_adversary_ramp, run.step)
        voice_logits = run.adversary(embedding[voiced], scale)
        loss = loss + F.cross_entropy(voice_logits, voice[voiced])
        counts[0] += int((voice_logits.argmax(dim=1) == voice[voiced]).sum())
        counts[1] += int(voiced.sum())
    return loss


def validate(cfg: TrainConfig, run: Run, data: Data, log):
    """Validation at a checkpoint step (of the averaged weights, if any); keeps
    best.pt when its key is at least the best so far."""
    model = run.model
    with run.average.applied(model) if run.average is not None else contextlib.nullcontext():
        acc, _ = evaluate(model, data.val)
        msg = f"step {run.step} validation accuracy {acc:.4f}"
        key = [acc]
        if data.stream is not None:
            model.eval()
            probs = tune_detection.stream_posteriors(model, data.stream[0])
            model.train()
            hop_s = model.cfg.chunk_samples / model.cfg.sample_rate
            starts = [(0, model.cfg.window_chunks)]  # one recording; the model's window is its warm-up
            tuned, smoothing, thr, r = tune_detection.tune(probs, starts, data.train.labels, hop_s, data.stream[1],
                                                           data.stream[2], cfg.val_max_fa)
            # (limit met, recall there or else minus the false-alarm rate, accuracy)
            key = [float(tuned[0]), float(tuned[1]), acc]
            msg += (f", stream recall {r['recall']:.4f} at threshold {thr:g} smoothing {smoothing} "
                    f"({r['fa_per_hour_keyword_free']:.1f} false alarms per keyword-free hour"
                    f"{'' if tuned[0] else ', over the limit'})")
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()
        if run.best_key is None or key >= run.best_key:
            run.best, run.best_key = acc, key
            save(os.path.join(cfg.out, "best.pt"), model, run.opt, run.step, run.best, data.train.labels, cfg,
                 (run.rng, run.augment_rng), run.best_key)


def steps(cfg: TrainConfig, run: Run, data: Data, draw, worker, stop: int, stop_signal: list):
    """The steps up to `stop` (or a signal): learning-rate schedule, batch, loss,
    update, the log every 25 steps, validation and checkpoints."""
    last = os.path.join(cfg.out, "last.pt")
    keyword_mask = torch.tensor([name in KEYWORDS for name in data.train.labels])
    run.model.train()
    log = open(os.path.join(cfg.out, "log.txt"), "a")
    losses = open(os.path.join(cfg.out, "losses.txt"), "a", buffering=1)
    t_last = time.time()
    counts = [0, 0]  # the voice adversary's hits and tries since the last log line
    while run.step < stop:
        lr = (cfg.lr * min(1.0, (run.step + 1) / max(1, cfg.warmup))
              * 0.5 * (1 + math.cos(math.pi * run.step / cfg.steps)))
        for g in run.opt.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        if worker is None:
            batch = draw(run.rng)
        else:
            try:
                batch = worker.next(run.rng)
            except RuntimeError as e:
                raise RunError(f"--prefetch: {e}") from None
        loss = step_loss(cfg, run, batch, keyword_mask, counts)
        run.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), 1.0)
        run.opt.step()
        if run.average is not None:
            run.average.update(run.model)
        run.step += 1
        losses.write(f"{run.step} {loss.item():.6f}\n")
        if run.step % 25 == 0:
            msg = f"step {run.step} loss {loss.item():.4f} lr {lr:.2e} {(time.time() - t_last) / 25:.2f} s/step"
            if counts[1]:  # how well the voice can still be told, on these 25 training batches
                msg += f", voice adversary {counts[0] / counts[1]:.3f} right"
                counts[:] = [0, 0]
            print(msg, flush=True)
            log.write(msg + "\n")
            t_last = time.time()
        checkpoint = run.step % cfg.eval_every == 0 or run.step == stop
        if checkpoint:
            validate(cfg, run, data, log)
        if checkpoint or stop_signal:
            save(last, run.model, run.opt, run.step, run.best, data.train.labels, cfg, (run.rng, run.augment_rng),
                 run.best_key, run.average, run.adversary)
        if stop_signal:
            break


def run(cfg: TrainConfig) -> int:
    """The whole run; its exit status (128 + the signal's number when a signal stopped it)."""
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    os.makedirs(cfg.out, exist_ok=True)
    t0 = time.time()
    data = load_data(cfg, t0)
    draw = make_drawer(cfg, data)
    # forked before the model exists, so the child inherits no torch thread pool
    worker = BatchWorker(cfg.prefetch, draw) if cfg.prefetch > 0 else None
    if worker is not None:
        print(f"prefetch: up to {cfg.prefetch} batches made ahead in process {worker.proc.pid}", flush=True)
    state = build(cfg, data)
    last = os.path.join(cfg.out, "last.pt")
    start(cfg, state, data, last)
    describe(cfg, state)
    try:
        SpeakerAugment(state.model, cfg.warp_prob, cfg.mask_prob, state.augment_rng, tuple(cfg.warp_range))
    except ValueError as e:
        raise RunError(str(e)) from None
    stop = cfg.stop_at or cfg.steps  # checked by TrainConfig.problem: 1 to --steps
    stop_signal = stop_on_signal()  # after the batch worker's fork: the worker keeps the defaults
    if worker is not None:
        worker.start(state.rng, stop - state.step)
    steps(cfg, state, data, draw, worker, stop, stop_signal)
    if worker is not None:
        worker.close()
    return finish(cfg, state, stop, stop_signal, last, t0)


def finish(cfg: TrainConfig, run: Run, stop: int, stop_signal: list, last: str, t0: float) -> int:
    if stop_signal and run.step < stop:  # (one during the last step stopped nothing)
        name = signal.Signals(stop_signal[0]).name
        print(f"stopped at step {run.step} of {cfg.steps} ({name}): {last} saved; go on with the same command "
              f"and --resume; best validation accuracy so far {run.best:.4f}, {time.time() - t0:.0f} s", flush=True)
        return 128 + stop_signal[0]
    if run.step < cfg.steps:
        print(f"stopped at step {run.step} of {cfg.steps} (--stop-at): go on with the same command and --resume "
              f"instead of --stop-at; best validation accuracy so far {run.best:.4f}, {time.time() - t0:.0f} s",
              flush=True)
        return 0
    print(f"done: {run.step} steps, kept the checkpoint with validation accuracy {run.best:.4f}, "
          f"{time.time() - t0:.0f} s", flush=True)
    return 0

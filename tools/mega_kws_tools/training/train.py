#!/usr/bin/python3
"""Train a streaming (unidirectional) Mega-chunk keyword spotter.

  train.py --data DIR --classes kws12 --out RUN_DIR [--steps N] [--preset demo|paper-base]

DIR is any Speech Commands-layout folder (one folder per word,
validation_list.txt, testing_list.txt): the real Speech Commands v0.02, or
the synthetic set from tools/data/make_sc10.py.

Classes:
  sc10   the ten keywords only (the paper's SC10 setting)
  kws12  the ten keywords + _silence_ + _unknown_ (what a live detector needs).
         _unknown_ = every other word folder; _silence_ = a _silence_ folder if
         present, else 1 s crops of _background_noise_.

Streaming-aware examples: each training input is a context second (silence,
noise or non-keyword speech) followed by the target second, shifted by up to
+-0.1 s so words do not line up with chunk boundaries. The loss uses the
logits over the last window only (MegaKWS.window_logits), which is exactly
what a streaming session reports, with the EMA state carrying the context.

Checkpoints (RUN_DIR/last.pt, best.pt) hold the config, weights, labels,
optimizer and RNG state: tools/convert/mega_convert.py reads them, and
--resume continues an interrupted run. SIGINT (Ctrl-C) or SIGTERM ends the
step under way, saves last.pt and exits with 128 + the signal's number, so
--resume goes on from that step; a second signal stops at once. With
--weight-average, validation and best.pt use the running average of the
weights; last.pt keeps both.
"""

import argparse
import contextlib
import dataclasses
import json
import math
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from mega_kws_tools import model as mt
from mega_kws_tools.audio import read_wav, SR
from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.augment.features import RANGE_LIMITS, SpeakerAugment, WARP_RANGE
from mega_kws_tools.augment.noise import BABBLE_SNR_DB, BABBLE_WORDS
from mega_kws_tools.augment.speaker import (COLOR_HOP, FORMANT_RANGE, PITCH_RANGE, SPEED_RANGE, TILT_RANGE,
                                            VOWEL_KNOT)
from mega_kws_tools.convert.loading import load_init
from mega_kws_tools.data.dataset import Dataset, voice_targets
from mega_kws_tools.data.layout import KEYWORDS
from mega_kws_tools.evaluation import streamscore, tune_detection
from mega_kws_tools.evaluation.accuracy import evaluate
from mega_kws_tools.training.adversary import adversary_scale, VoiceAdversary
from mega_kws_tools.training.average import WeightAverage
from mega_kws_tools.training.checkpoints import save, state_mismatch
from mega_kws_tools.training.frontend_init import init_logmel_bias, init_running_mean
from mega_kws_tools.training.losses import js_divergence, keyword_js_divergence, mixup, mixup_loss
from mega_kws_tools.training.mining import HardExamples
from mega_kws_tools.training.presets import PRESETS
from mega_kws_tools.training.sampling import sampling_probabilities
from mega_kws_tools.training.worker import BatchWorker, stop_on_signal


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="Speech Commands-layout folder")
    ap.add_argument("--classes", choices=["sc10", "kws12"], default="kws12")
    ap.add_argument("--out", required=True, help="run directory (checkpoints, log)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=200, help="steps of linear learning-rate warm-up")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--frontend-lr-scale", type=float, default=0.03,
                    help="learning-rate factor for the log-power front end's filters")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=0, metavar="N",
                    help="make up to N training batches ahead in a second process (a second core), so "
                         "the augmentation does not wait on the model; the same batches, losses and "
                         "checkpoints as without it (default 0: in this process)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-per-class", type=int, default=0, help="cap clips per class (smoke tests)")
    ap.add_argument("--resume", action="store_true", help="continue from RUN_DIR/last.pt")
    ap.add_argument("--stop-at", type=int, metavar="STEP",
                    help="stop after this step (validated and checkpointed) and leave the rest of --steps, "
                         "schedule included, to a later --resume: a run split across sessions")
    ap.add_argument("--extra-data", action="append", default=[], metavar="DIR",
                    help="another Speech Commands-layout folder whose training split is added to the "
                         "training clips (repeatable); validation comes from --data and --extra-val")
    ap.add_argument("--extra-val", action="append", default=[], metavar="DIR",
                    help="another Speech Commands-layout folder whose validation split is added to the "
                         "validation clips (repeatable), e.g. real recordings of validation-split speakers")
    ap.add_argument("--noise-prob", type=float, default=0.0, metavar="P",
                    help="mix a fresh noise or babble clip into a training example with probability P "
                         "(on-the-fly augmentation against overfitting; default 0)")
    ap.add_argument("--babble-prob", type=float, default=0.0, metavar="P",
                    help="with --noise-prob: the noise is, with probability P, babble of 3-7 _unknown_ words "
                         "at -3..12 dB SNR over the second instead of one noise clip (default 0)")
    ap.add_argument("--speed-prob", type=float, default=0.0, metavar="P",
                    help=f"play a training example {SPEED_RANGE[0]}-{SPEED_RANGE[1]}x as fast (tempo and pitch) "
                         "with probability P (on-the-fly augmentation; default 0)")
    ap.add_argument("--speed-range", type=float, nargs=2, default=list(SPEED_RANGE), metavar=("LO", "HI"),
                    help=f"the playback-rate factors of --speed-prob (default {SPEED_RANGE[0]} {SPEED_RANGE[1]}; "
                         f"{RANGE_LIMITS[0]}-{RANGE_LIMITS[1]})")
    ap.add_argument("--color-prob", type=float, default=0.0, metavar="P",
                    help=f"move a training example's formants by {FORMANT_RANGE[0]}-{FORMANT_RANGE[1]}x at the same "
                         f"pitch and tilt its spectrum by {TILT_RANGE[0]:+g} to {TILT_RANGE[1]:+g} dB per octave with "
                         "probability P (speaker augmentation; default 0)")
    ap.add_argument("--vowel-prob", type=float, default=0.0, metavar="P",
                    help=f"move a training example's formants by a factor that drifts within {FORMANT_RANGE[0]}-"
                         f"{FORMANT_RANGE[1]}x from one {VOWEL_KNOT * COLOR_HOP * 1000 // SR} ms stretch to the next "
                         "(each sound its own vowel quality) with probability P (speaker augmentation; default 0)")
    ap.add_argument("--pitch-prob", type=float, default=0.0, metavar="P",
                    help=f"move a training example's pitch by {PITCH_RANGE[0]}-{PITCH_RANGE[1]}x, its formants and "
                         "timing kept, with probability P (speaker augmentation; default 0)")
    ap.add_argument("--warp-prob", type=float, default=0.0, metavar="P",
                    help=f"frequency-warp the log-power front end's filters by {WARP_RANGE[0]}-{WARP_RANGE[1]} for a "
                         "quarter of the batch with probability P (vocal-tract-length augmentation; default 0)")
    ap.add_argument("--warp-range", type=float, nargs=2, default=list(WARP_RANGE), metavar=("LO", "HI"),
                    help=f"the frequency-warp factors of --warp-prob (default {WARP_RANGE[0]} {WARP_RANGE[1]}; "
                         f"{RANGE_LIMITS[0]}-{RANGE_LIMITS[1]})")
    ap.add_argument("--mask-prob", type=float, default=0.0, metavar="P",
                    help="SpecAugment-style time and channel masks on an example's features with probability P "
                         "(default 0)")
    ap.add_argument("--unknown-share", type=float, default=0.0, metavar="S",
                    help="draw _unknown_ clips this share of the time (the other classes equally often in "
                         "the rest); default 0: every class equally often")
    ap.add_argument("--extra-share", type=float, metavar="S",
                    help="within each class that has --extra-data clips and --data clips, draw the extra "
                         "ones this share of the class's time (default: as their number falls, so a class "
                         "with few real clips is heard almost only in synthetic voices)")
    ap.add_argument("--splice-prob", type=float, default=0.0, metavar="P",
                    help="with probability P a drawn keyword clip becomes half of it spliced to half of an "
                         "_unknown_ word (its onset and the other's coda, or the reverse), labelled _unknown_: "
                         "near misses that sound like the start or end of a keyword (default 0)")
    ap.add_argument("--label-smoothing", type=float, default=0.05, metavar="E",
                    help="train toward targets of 1 - E + E/classes for the clip's class and E/classes for "
                         "each other class, which bounds how sure the model learns to be (default 0.05)")
    ap.add_argument("--hard-examples", action="append", default=[], metavar="NPZ",
                    help="hard streaming windows of training voices (tools/mega_kws_tools/training/mine_hard.py); repeatable")
    ap.add_argument("--hard-share", type=float, default=0.2, metavar="S",
                    help="with --hard-examples: the share of each batch drawn from them (default 0.2)")
    ap.add_argument("--voice-adversary", type=float, default=0.0, metavar="W",
                    help="domain-adversarial training against the voice: a small classifier names each "
                         "clip's voice group (all real speakers one class) from the window embedding, and "
                         "its gradient reaches the encoder reversed and times W, so that the voice stops "
                         "being a usable cue (default 0: off; training only, not in the model file)")
    ap.add_argument("--voice-adversary-ramp", type=int, default=200, metavar="N",
                    help="with --voice-adversary: W rises from 0 to W over the first N steps of the run "
                         "(default 200), so the classifier first learns the voices")
    ap.add_argument("--mixup-prob", type=float, default=0.0, metavar="P",
                    help="each training clip, with probability P, is mixed with another clip of its batch "
                         "(lam of it, lam ~ Beta(A, A) folded to >= 0.5) and the loss is the same mix of the "
                         "two labels' cross-entropies (mixup); default 0: off")
    ap.add_argument("--mixup-alpha", type=float, default=0.4, metavar="A",
                    help="with --mixup-prob: the Beta distribution's parameter (small: lam near 1)")
    ap.add_argument("--consistency", type=float, default=0.0, metavar="W",
                    help="draw half a batch of clips and augment each twice (its own pitch, speed, noise, "
                         "shift, context and warp), and add W times the Jensen-Shannon divergence between "
                         "the two views' predictions to the loss: the same word in two made-up voices "
                         "must get the same answer (default 0: off; try 2-10)")
    ap.add_argument("--consistency-scope", choices=("all", "keywords"), default="all",
                    help="with --consistency: 'all' compares the views over every class and clip; 'keywords' "
                         "only on keyword clips and over the keyword classes renormalized, so the views must "
                         "agree on which keyword it is but not on whether it is one (default all)")
    ap.add_argument("--class-boost", action="append", default=[], metavar="WORD=F",
                    help="draw class WORD F times as often as the class balance would (F > 0), taken in proportion "
                         "from the other classes; repeatable, e.g. --class-boost go=2 --class-boost no=1.5")
    ap.add_argument("--val-stream", nargs=2, metavar=("WAV", "CSV"),
                    help="a continuous recording of validation voices and its labels (make_stream.py): "
                         "keep the checkpoint with the best recall there at <= --val-max-fa false alarms "
                         "per keyword-free hour (as tune_detection.py tunes it; ties: validation accuracy) "
                         "instead of the best validation accuracy")
    ap.add_argument("--val-max-fa", type=float, default=5.0, metavar="N",
                    help="with --val-stream: false alarms per keyword-free hour allowed (default 5)")
    ap.add_argument("--weight-average", type=float, metavar="DECAY",
                    help="keep an exponential moving average of the weights (and BatchNorm statistics) with "
                         "this decay per step, e.g. 0.999; validation, the kept checkpoint (best.pt) and "
                         "so the converted model use the average (default: off)")
    ap.add_argument("--patch-norm", choices=mt.PATCH_NORMS, default="none",
                    help="running_mean: the log-power features less their running mean per channel "
                         "(a streaming cepstral-mean-style normalization; needs a log-power preset)")
    ap.add_argument("--patch-norm-decay", type=float, default=0.01, metavar="A",
                    help="with --patch-norm running_mean: weight of each new token in the mean (default 0.01, "
                         "about 1 s at 100 tokens/s)")
    ap.add_argument("--init", metavar="CKPT",
                    help="start from this checkpoint's weights (same preset) with a fresh optimizer "
                         "and schedule: fine-tuning, e.g. on more data; a .mega model file works too "
                         "(e.g. models/sc10-demo.mega, unpacked by tools/mega_kws_tools/convert/mega_unpack.py)")
    args = ap.parse_args()
    if args.weight_average is not None and not 0.0 < args.weight_average < 1.0:
        ap.error(f"--weight-average {args.weight_average}: must be between 0 and 1 (exclusive)")
    if args.prefetch < 0:
        ap.error(f"--prefetch {args.prefetch}: must be 0 (off) or more batches")
    if args.stop_at is not None and not 0 < args.stop_at <= args.steps:
        ap.error(f"--stop-at {args.stop_at}: must be a step of the run, 1 to --steps {args.steps}")
    if args.extra_share is not None and not args.extra_data:
        ap.error("--extra-share needs --extra-data")
    if not 0.0 <= args.mixup_prob <= 1.0:
        ap.error(f"--mixup-prob {args.mixup_prob}: must be between 0 and 1")
    if not args.mixup_alpha > 0:
        ap.error(f"--mixup-alpha {args.mixup_alpha}: must be above 0")
    if args.mixup_prob > 0 and args.consistency > 0:
        ap.error("--mixup-prob does not combine with --consistency (its two views of a clip would be mixed "
                 "with different partners)")
    if args.consistency < 0:
        ap.error(f"--consistency {args.consistency}: must be at least 0")
    if not (args.voice_adversary >= 0 and math.isfinite(args.voice_adversary)):
        ap.error(f"--voice-adversary {args.voice_adversary}: must be a number of at least 0")
    if args.voice_adversary_ramp < 0:
        ap.error(f"--voice-adversary-ramp {args.voice_adversary_ramp}: must be 0 or more steps")
    if args.voice_adversary > 0 and (args.mixup_prob > 0 or args.hard_examples):
        ap.error("--voice-adversary does not combine with --mixup-prob or --hard-examples (a mixed clip "
                 "or a mined window has no one voice)")
    if args.consistency > 0 and (args.batch < 2 or args.batch % 2):
        ap.error(f"--consistency needs an even --batch (two views of each clip), not {args.batch}")
    if args.consistency_scope != "all" and args.consistency == 0:
        ap.error(f"--consistency-scope {args.consistency_scope} needs --consistency W (the term it scopes)")
    if args.consistency > 0 and (args.hard_examples or args.splice_prob > 0):
        ap.error("--consistency does not combine with --hard-examples or --splice-prob "
                 "(both change a clip's label in one view only)")
    boost = {}
    for item in args.class_boost:
        word, _, factor = item.partition("=")
        try:
            boost[word] = float(factor)
        except ValueError:
            ap.error(f"--class-boost {item}: expected WORD=F with a number F, e.g. go=2")
        if not boost[word] > 0 or not math.isfinite(boost[word]):
            ap.error(f"--class-boost {item}: the factor must be a positive number")
    if not 0.0 <= args.label_smoothing < 1.0:
        ap.error(f"--label-smoothing {args.label_smoothing}: must be at least 0 and below 1")
    if args.babble_prob > 0 and args.noise_prob <= 0:
        ap.error("--babble-prob needs --noise-prob P > 0 (it decides what the noise is, not how often)")
    if args.babble_prob > 0 and args.classes != "kws12":
        ap.error("--babble-prob needs --classes kws12 (its babble is _unknown_ words)")
    for name, prob in (("speed_range", "speed_prob"), ("warp_range", "warp_prob")):
        flag, lo, hi = "--" + name.replace("_", "-"), *getattr(args, name)
        if not (math.isfinite(lo) and math.isfinite(hi) and RANGE_LIMITS[0] <= lo < hi <= RANGE_LIMITS[1]):
            ap.error(f"{flag} {lo:g} {hi:g}: needs {RANGE_LIMITS[0]:g} <= LO < HI <= {RANGE_LIMITS[1]:g}")
        if [lo, hi] != list(ap.get_default(name)) and getattr(args, prob) <= 0:
            ap.error(f"{flag} needs --{prob.replace('_', '-')} P > 0 (it sets the factors, not how often)")
    for name in ("babble_prob", "noise_prob", "speed_prob", "color_prob", "vowel_prob", "pitch_prob", "splice_prob", "unknown_share", "warp_prob", "mask_prob", "hard_share", "extra_share"):
        if getattr(args, name) is not None and not 0.0 <= getattr(args, name) <= 1.0:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be between 0 and 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    for d in [args.data] + args.extra_data + args.extra_val:
        if not os.path.isdir(d):
            print(f"train.py: {d}: not a folder", file=sys.stderr)
            return 1
    train = Dataset(args.data, args.classes, "training", args.max_per_class, args.seed)
    for d in args.extra_data:
        train.extend(Dataset(d, args.classes, "training", args.max_per_class, args.seed))
    val = Dataset(args.data, args.classes, "validation", args.max_per_class, args.seed)
    for d in args.extra_val:
        val.extend(Dataset(d, args.classes, "validation", args.max_per_class, args.seed))
    if len(train) == 0:
        print(f"train.py: no training clips found under {args.data}", file=sys.stderr)
        return 1
    print(f"data: {len(train)} training, {len(val)} validation clips, labels {train.labels} "
          f"({time.time() - t0:.0f} s to load)", flush=True)
    try:
        hard = HardExamples(args.hard_examples, train.labels)
    except (OSError, ValueError, KeyError) as e:
        print(f"train.py: --hard-examples: {e}", file=sys.stderr)
        return 1
    stream = None
    if args.val_stream:
        try:
            keywords, free = streamscore.read_stream_labels(args.val_stream[1])
            stream = (read_wav(args.val_stream[0]).astype(np.float32) / 32768.0, keywords, free)
        except (OSError, ValueError, KeyError) as e:
            print(f"train.py: --val-stream: {e}", file=sys.stderr)
            return 1
        if not free:
            print(f"train.py: --val-stream: {args.val_stream[1]} marks no keyword-free stretch", file=sys.stderr)
            return 1
    if len(hard):
        print(f"hard examples: {len(hard)} windows, {hard.summary()}, drawn {args.hard_share:.0%} of the time",
              flush=True)
    unknown_boost = sorted(set(boost) - set(train.labels))
    if unknown_boost:
        print(f"train.py: --class-boost {', '.join(unknown_boost)}: not a class of this run "
              f"({', '.join(train.labels)})", file=sys.stderr)
        return 1
    p_sample = sampling_probabilities(train, args.unknown_share, args.extra_share, boost)
    views = 2 if args.consistency > 0 else 1  # --consistency: two augmented views of each drawn clip
    voice_names, voice_class = voice_targets(train)
    if args.voice_adversary > 0:
        if len(voice_names) < 2:
            print(f"train.py: --voice-adversary: the training clips have {len(voice_names)} voice(s) "
                  f"known by name, need 2 or more", file=sys.stderr)
            return 1
        print(f"voice adversary: weight {args.voice_adversary:g} (reached at step "
              f"{args.voice_adversary_ramp}), {len(voice_names)} voice classes over "
              f"{int((voice_class >= 0).sum())} clips", flush=True)

    def draw(rng: np.random.Generator):
        """The next training batch (x, y, voice class per clip) and what it draws from rng."""
        idx = rng.choice(len(train), size=args.batch // views, p=p_sample)
        xs, ys = zip(*(make_batch(train, idx, rng, train=True, noise_prob=args.noise_prob,
                                  speed_prob=args.speed_prob, splice_prob=args.splice_prob,
                                  color_prob=args.color_prob, vowel_prob=args.vowel_prob,
                                  pitch_prob=args.pitch_prob, babble_prob=args.babble_prob,
                                  speed_range=tuple(args.speed_range))
                         for _ in range(views)))
        x, y = torch.cat(xs), torch.cat(ys)
        if len(hard):
            hard.replace(x, y, rng, args.hard_share)
        return x, y, torch.from_numpy(np.tile(voice_class[idx], views))

    # forked before the model exists, so the child inherits no torch thread pool
    worker = BatchWorker(args.prefetch, draw) if args.prefetch > 0 else None
    if worker is not None:
        print(f"prefetch: up to {args.prefetch} batches made ahead in process {worker.proc.pid}", flush=True)

    cfg = mt.MegaConfig(**PRESETS[args.preset], n_classes=len(train.labels), bidirectional=False,
                        patch_norm=args.patch_norm, patch_norm_decay=args.patch_norm_decay)
    try:
        model = mt.MegaKWS(cfg)
    except ValueError as e:
        print(f"train.py: preset {args.preset}: {e}", file=sys.stderr)
        return 1
    # Adam moves every weight by about lr per step, whatever its size: the front-end
    # filters (about 0.01 each) get a proportionally smaller rate, or the first
    # steps would wipe out their filterbank initialization.
    if cfg.patch_features == "logpower":
        front = [p for n, p in model.named_parameters() if n == "embed_tokens.weight"]
        rest = [p for n, p in model.named_parameters() if n != "embed_tokens.weight"]
        groups = [{"params": rest, "lr_scale": 1.0}, {"params": front, "lr_scale": args.frontend_lr_scale}]
    else:
        groups = [{"params": list(model.parameters()), "lr_scale": 1.0}]  # one group, as older checkpoints have
    adversary = None
    if args.voice_adversary > 0:
        adversary = VoiceAdversary(cfg.embed_dim, voice_names)
        groups.append({"params": list(adversary.parameters()), "lr_scale": VoiceAdversary.LR_SCALE})
    opt = torch.optim.AdamW(groups, lr=args.lr, weight_decay=args.weight_decay)
    step, best, best_key = 0, 0.0, None
    rng = np.random.default_rng(args.seed)
    augment_rng = np.random.default_rng(args.seed + 1)
    last = os.path.join(args.out, "last.pt")
    resumed = None
    if args.resume and os.path.exists(last):
        ck = torch.load(last, map_location="cpu")
        why = state_mismatch(model, ck["model"])
        if why:
            print(f"train.py: --resume {last} does not fit this run's flags (preset {args.preset}): {why}",
                  file=sys.stderr)
            return 1
        model.load_state_dict(ck["model"])
        if adversary is not None:
            saved = ck.get("voice_adversary")
            if saved is None or saved["names"] != voice_names:
                print(f"train.py: --resume {last}: "
                      f"{'no voice adversary in it' if saved is None else 'its voice adversary has other voices'}"
                      f"; resume with the flags it was made with", file=sys.stderr)
                return 1
            adversary.load_state_dict(saved["state"])
        elif "voice_adversary" in ck:
            print(f"train.py: --resume {last} was made with --voice-adversary; resume with it", file=sys.stderr)
            return 1
        opt.load_state_dict(ck["optimizer"])
        step, best = ck["step"], ck["best_val"]
        # older checkpoints kept the best validation accuracy, without a key
        best_key = ck.get("best_key") or (None if args.val_stream else [best])
        rng.bit_generator.state = ck["rng"]
        if "augment_rng" in ck:  # older checkpoints restart it
            augment_rng.bit_generator.state = ck["augment_rng"]
        resumed = ck
        print(f"resumed at step {step} (best validation accuracy {best:.4f})", flush=True)
    elif args.init:
        ck = load_init(args.init)
        if ck is None:
            return 1
        if ck.get("labels") != train.labels:
            print(f"train.py: {args.init} has labels {ck.get('labels')}, this run {train.labels}", file=sys.stderr)
            return 1
        weights = dict(ck["model"])
        fresh_norm = cfg.patch_norm != "none" and "embed_tokens.norm_init" not in weights
        if fresh_norm:  # a checkpoint without the normalization: start it where it changes nothing yet
            weights["embed_tokens.norm_init"] = model.embed_tokens.norm_init.detach()
        why = state_mismatch(model, weights)
        if why:
            print(f"train.py: --init {args.init} does not fit preset {args.preset}: {why}", file=sys.stderr)
            return 1
        model.load_state_dict(weights)
        if fresh_norm:
            init_running_mean(model, train, np.random.default_rng(args.seed + 2), keep_function=True)
        val_acc = ck.get("best_val")
        print(f"initialized from {args.init} (its step {ck.get('step')}, validation accuracy "
              f"{'unknown' if val_acc is None else f'{val_acc:.4f}'})", flush=True)
    elif cfg.patch_norm != "none":
        init_running_mean(model, train, np.random.default_rng(args.seed + 2), keep_function=False)
    elif cfg.patch_features == "logmel":
        init_logmel_bias(model, train, np.random.default_rng(args.seed + 2))
    average = None
    if args.weight_average is not None:
        average = WeightAverage(model, args.weight_average)
        if resumed is not None and "weight_average" in resumed:
            try:
                average.load_state_dict(resumed["weight_average"])
            except ValueError as e:
                print(f"train.py: {last}: {e}", file=sys.stderr)
                return 1
        print(f"weight average: decay {args.weight_average}, {average.n} updates so far", flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, config {json.dumps(dataclasses.asdict(cfg))}", flush=True)
    print(f"label smoothing {args.label_smoothing}", flush=True)
    if args.mixup_prob > 0:
        print(f"mixup: {args.mixup_prob:g} of the clips, lam ~ Beta({args.mixup_alpha:g}) folded to >= 0.5",
              flush=True)
    if args.babble_prob > 0:
        print(f"babble: {args.babble_prob:g} of the noise, {BABBLE_WORDS[0]}-{BABBLE_WORDS[1]} _unknown_ words at "
              f"{BABBLE_SNR_DB[0]:g}..{BABBLE_SNR_DB[1]:g} dB", flush=True)

    if args.speed_prob > 0 or args.warp_prob > 0:
        print(f"speed factors {args.speed_range[0]:g}-{args.speed_range[1]:g} (p {args.speed_prob:g}), "
              f"warp factors {args.warp_range[0]:g}-{args.warp_range[1]:g} (p {args.warp_prob:g})", flush=True)
    try:
        SpeakerAugment(model, args.warp_prob, args.mask_prob, augment_rng, tuple(args.warp_range))
    except ValueError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    keyword_mask = torch.tensor([name in KEYWORDS for name in train.labels])
    model.train()
    log = open(os.path.join(args.out, "log.txt"), "a")
    losses = open(os.path.join(args.out, "losses.txt"), "a", buffering=1)
    t_last = time.time()
    voice_right = voice_seen = 0
    stop = args.stop_at or args.steps  # checked above: 1 to --steps
    stop_signal = stop_on_signal()  # after the batch worker's fork: the worker keeps the defaults
    if worker is not None:
        worker.start(rng, stop - step)
    while step < stop:
        lr = args.lr * min(1.0, (step + 1) / max(1, args.warmup)) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for g in opt.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        if worker is None:
            x, y, voice = draw(rng)
        else:
            try:
                x, y, voice = worker.next(rng)
            except RuntimeError as e:
                print(f"train.py: --prefetch: {e}", file=sys.stderr)
                return 1
        if args.mixup_prob > 0:  # drawn from augment_rng, in this process: --resume restores it
            x, partner_y, lam = mixup(x, y, augment_rng, args.mixup_prob, args.mixup_alpha)
        embedding = model.window_embedding(x)
        logits = model.head(embedding)
        if args.mixup_prob > 0:
            loss = mixup_loss(logits, y, partner_y, lam, args.label_smoothing)
        else:
            loss = F.cross_entropy(logits, y, label_smoothing=args.label_smoothing)
        if views == 2:
            a, b = logits.chunk(2)
            divergence = (keyword_js_divergence(a, b, y[:len(a)], keyword_mask)
                          if args.consistency_scope == "keywords" else js_divergence(a, b))
            loss = loss + args.consistency * divergence
        voiced = voice >= 0
        if adversary is not None and bool(voiced.any()):
            scale = adversary_scale(args.voice_adversary, args.voice_adversary_ramp, step)
            voice_logits = adversary(embedding[voiced], scale)
            loss = loss + F.cross_entropy(voice_logits, voice[voiced])
            voice_right += int((voice_logits.argmax(dim=1) == voice[voiced]).sum())
            voice_seen += int(voiced.sum())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if average is not None:
            average.update(model)
        step += 1
        losses.write(f"{step} {loss.item():.6f}\n")
        if step % 25 == 0:
            msg = f"step {step} loss {loss.item():.4f} lr {lr:.2e} {(time.time() - t_last) / 25:.2f} s/step"
            if voice_seen:  # how well the voice can still be told, on these 25 training batches
                msg += f", voice adversary {voice_right / voice_seen:.3f} right"
                voice_right = voice_seen = 0
            print(msg, flush=True)
            log.write(msg + "\n")
            t_last = time.time()
        checkpoint = step % args.eval_every == 0 or step == stop
        if checkpoint:
            # the averaged weights, if any, are what is validated and kept as best.pt
            with average.applied(model) if average is not None else contextlib.nullcontext():
                acc, _ = evaluate(model, val)
                msg = f"step {step} validation accuracy {acc:.4f}"
                key = [acc]
                if stream is not None:
                    model.eval()
                    probs = tune_detection.stream_posteriors(model, stream[0])
                    model.train()
                    hop_s = cfg.chunk_samples / cfg.sample_rate
                    tuned, smoothing, thr, r = tune_detection.tune(probs, train.labels, hop_s, stream[1],
                                                                   stream[2], args.val_max_fa)
                    # (limit met, recall there or else minus the false-alarm rate, accuracy)
                    key = [float(tuned[0]), float(tuned[1]), acc]
                    msg += (f", stream recall {r['recall']:.4f} at threshold {thr:g} smoothing {smoothing} "
                            f"({r['fa_per_hour_keyword_free']:.1f} false alarms per keyword-free hour"
                            f"{'' if tuned[0] else ', over the limit'})")
                print(msg, flush=True)
                log.write(msg + "\n")
                log.flush()
                if best_key is None or key >= best_key:
                    best, best_key = acc, key
                    save(os.path.join(args.out, "best.pt"), model, opt, step, best, train.labels, args,
                         (rng, augment_rng), best_key)
        if checkpoint or stop_signal:
            save(last, model, opt, step, best, train.labels, args, (rng, augment_rng), best_key, average,
                 adversary)
        if stop_signal:
            break
    if worker is not None:
        worker.close()
    if stop_signal and step < stop:  # (one during the last step stopped nothing)
        name = signal.Signals(stop_signal[0]).name
        print(f"stopped at step {step} of {args.steps} ({name}): {last} saved; go on with the same command "
              f"and --resume; best validation accuracy so far {best:.4f}, {time.time() - t0:.0f} s", flush=True)
        return 128 + stop_signal[0]
    if step < args.steps:
        print(f"stopped at step {step} of {args.steps} (--stop-at): go on with the same command and --resume "
              f"instead of --stop-at; best validation accuracy so far {best:.4f}, {time.time() - t0:.0f} s",
              flush=True)
        return 0
    print(f"done: {step} steps, kept the checkpoint with validation accuracy {best:.4f}, "
          f"{time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
"""The training run's settings: one dataclass, TrainConfig, whose fields are the
command line's options (the flag is the field's name with dashes, its
argparse settings the field's metadata), so the run is handed one object
instead of 48 loose values, and a checkpoint stores it as a plain dict.

  cfg = parse(["--data", "DIR", "--out", "RUN"])   # as the command line
  cfg = TrainConfig(data="DIR", out="RUN", steps=100)  # in code; cfg.problem() says what is wrong
"""

import argparse
import dataclasses
import itertools
import math
from typing import Optional

from mega_kws_tools import model as mt
from mega_kws_tools.audio import SR
from mega_kws_tools.augment.features import RANGE_LIMITS, WARP_RANGE
from mega_kws_tools.augment.nonspeech import KINDS as NONSPEECH_KINDS
from mega_kws_tools.augment.speaker import COLOR_HOP, FORMANT_RANGE, PITCH_RANGE, SPEED_RANGE, TILT_RANGE, VOWEL_KNOT
from mega_kws_tools.training.presets import PRESETS

PROBABILITIES = ("babble_prob", "noise_prob", "speed_prob", "color_prob", "vowel_prob", "pitch_prob", "splice_prob",
                 "unknown_share", "warp_prob", "mask_prob", "hard_share", "extra_share", "nonspeech_negatives",
                 "unlabeled_share")


def option(default, **argparse_settings):
    """A TrainConfig field: its default (a list is copied for each config) and,
    as metadata, how the command line sets it."""
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=argparse_settings)
    return dataclasses.field(default=default, metadata=argparse_settings)


@dataclasses.dataclass
class TrainConfig:
    """Every setting of a training run; see train.py --help for each."""

    data: Optional[str] = option(None, required=True, help="Speech Commands-layout folder")
    classes: str = option("kws12", choices=["sc10", "kws12"])
    out: Optional[str] = option(None, required=True, help="run directory (checkpoints, log)")
    preset: str = option("demo", choices=sorted(PRESETS))
    steps: int = option(4000, type=int)
    batch: int = option(64, type=int)
    lr: float = option(3e-3, type=float)
    weight_decay: float = option(0.01, type=float)
    warmup: int = option(200, type=int, help="steps of linear learning-rate warm-up")
    eval_every: int = option(250, type=int)
    frontend_lr_scale: float = option(
        0.03, type=float,
        help="learning-rate factor for the log-power front end's filters")
    threads: int = option(2, type=int)
    prefetch: int = option(
        0, type=int, metavar="N",
        help="make up to N training batches ahead in a second process (a second core), so "
             "the augmentation does not wait on the model; the same batches, losses and "
             "checkpoints as without it (default 0: in this process)")
    seed: int = option(1, type=int)
    max_per_class: int = option(0, type=int, help="cap clips per class (smoke tests)")
    resume: bool = option(False, help="continue from RUN_DIR/last.pt")
    stop_at: Optional[int] = option(
        None, type=int, metavar="STEP",
        help="stop after this step (validated and checkpointed) and leave the rest of --steps, "
             "schedule included, to a later --resume: a run split across sessions")
    extra_data: list = option(
        [], action="append", metavar="DIR",
        help="another Speech Commands-layout folder whose training split is added to the "
             "training clips (repeatable); validation comes from --data and --extra-val")
    extra_val: list = option(
        [], action="append", metavar="DIR",
        help="another Speech Commands-layout folder whose validation split is added to the "
             "validation clips (repeatable), e.g. real recordings of validation-split speakers")
    noise_prob: float = option(
        0.0, type=float, metavar="P",
        help="mix a fresh noise or babble clip into a training example with probability P "
             "(on-the-fly augmentation against overfitting; default 0)")
    babble_prob: float = option(
        0.0, type=float, metavar="P",
        help="with --noise-prob: the noise is, with probability P, babble of 3-7 _unknown_ words "
             "at -3..12 dB SNR over the second instead of one noise clip (default 0)")
    speed_prob: float = option(
        0.0, type=float, metavar="P",
        help=f"play a training example {SPEED_RANGE[0]}-{SPEED_RANGE[1]}x as fast (tempo and pitch) "
             "with probability P (on-the-fly augmentation; default 0)")
    speed_range: list = option(
        list(SPEED_RANGE), type=float, nargs=2, metavar=("LO", "HI"),
        help=f"the playback-rate factors of --speed-prob (default {SPEED_RANGE[0]} {SPEED_RANGE[1]}; "
             f"{RANGE_LIMITS[0]}-{RANGE_LIMITS[1]})")
    color_prob: float = option(
        0.0, type=float, metavar="P",
        help=f"move a training example's formants by {FORMANT_RANGE[0]}-{FORMANT_RANGE[1]}x at the same "
             f"pitch and tilt its spectrum by {TILT_RANGE[0]:+g} to {TILT_RANGE[1]:+g} dB per octave with "
             "probability P (speaker augmentation; default 0)")
    vowel_prob: float = option(
        0.0, type=float, metavar="P",
        help=f"move a training example's formants by a factor that drifts within {FORMANT_RANGE[0]}-"
             f"{FORMANT_RANGE[1]}x from one {VOWEL_KNOT * COLOR_HOP * 1000 // SR} ms stretch to the next "
             "(each sound its own vowel quality) with probability P (speaker augmentation; default 0)")
    pitch_prob: float = option(
        0.0, type=float, metavar="P",
        help=f"move a training example's pitch by {PITCH_RANGE[0]}-{PITCH_RANGE[1]}x, its formants and "
             "timing kept, with probability P (speaker augmentation; default 0)")
    warp_prob: float = option(
        0.0, type=float, metavar="P",
        help=f"frequency-warp the log-power front end's filters by {WARP_RANGE[0]}-{WARP_RANGE[1]} for a "
             "quarter of the batch with probability P (vocal-tract-length augmentation; default 0)")
    warp_range: list = option(
        list(WARP_RANGE), type=float, nargs=2, metavar=("LO", "HI"),
        help=f"the frequency-warp factors of --warp-prob (default {WARP_RANGE[0]} {WARP_RANGE[1]}; "
             f"{RANGE_LIMITS[0]}-{RANGE_LIMITS[1]})")
    mask_prob: float = option(
        0.0, type=float, metavar="P",
        help="SpecAugment-style time and channel masks on an example's features with probability P "
             "(default 0)")
    nonspeech_negatives: float = option(
        0.0, type=float, metavar="F",
        help=f"replace this fraction of the training examples, whole, with a generated non-speech sound "
             f"({', '.join(NONSPEECH_KINDS)}: random frequencies, beep timings and levels) labelled _silence_, "
             "so that tones, beeps and music stop firing (needs --classes kws12; default 0)")
    nonspeech_weight: list = option(
        [], action="append", metavar="KIND=W",
        help=f"draw the generated non-speech sounds of KIND ({', '.join(NONSPEECH_KINDS)}) W times as often "
             "as a kind not named (default: every kind equally often); repeatable, e.g. beeps=6")
    nonspeech_audio: list = option(
        [], action="append", metavar="PATH",
        help="recorded non-speech (music) for --nonspeech-negatives: a 16 kHz WAV or a folder of them; half "
             "of the non-speech examples become a random slice of one, at a random level; repeatable "
             "(tools/scripts/music_negatives.sh makes a folder from Debian's game music)")
    unknown_share: float = option(
        0.0, type=float, metavar="S",
        help="draw _unknown_ clips this share of the time (the other classes equally often in "
             "the rest); default 0: every class equally often")
    extra_share: Optional[float] = option(
        None, type=float, metavar="S",
        help="within each class that has --extra-data clips and --data clips, draw the extra "
             "ones this share of the class's time (default: as their number falls, so a class "
             "with few real clips is heard almost only in synthetic voices)")
    splice_prob: float = option(
        0.0, type=float, metavar="P",
        help="with probability P a drawn keyword clip becomes half of it spliced to half of an "
             "_unknown_ word (its onset and the other's coda, or the reverse), labelled _unknown_: "
             "near misses that sound like the start or end of a keyword (default 0)")
    label_smoothing: float = option(
        0.05, type=float, metavar="E",
        help="train toward targets of 1 - E + E/classes for the clip's class and E/classes for "
             "each other class, which bounds how sure the model learns to be (default 0.05)")
    hard_examples: list = option(
        [], action="append", metavar="NPZ",
        help="hard streaming windows of training voices (tools/mega_kws_tools/training/mine_hard.py); repeatable")
    hard_share: float = option(
        0.2, type=float, metavar="S",
        help="with --hard-examples: the share of each batch drawn from them (default 0.2)")
    voice_adversary: float = option(
        0.0, type=float, metavar="W",
        help="domain-adversarial training against the voice: a small classifier names each "
             "clip's voice group (all real speakers one class) from the window embedding, and "
             "its gradient reaches the encoder reversed and times W, so that the voice stops "
             "being a usable cue (default 0: off; training only, not in the model file)")
    voice_adversary_ramp: int = option(
        200, type=int, metavar="N",
        help="with --voice-adversary: W rises from 0 to W over the first N steps of the run "
             "(default 200), so the classifier first learns the voices")
    mixup_prob: float = option(
        0.0, type=float, metavar="P",
        help="each training clip, with probability P, is mixed with another clip of its batch "
             "(lam of it, lam ~ Beta(A, A) folded to >= 0.5) and the loss is the same mix of the "
             "two labels' cross-entropies (mixup); default 0: off")
    mixup_alpha: float = option(
        0.4, type=float, metavar="A",
        help="with --mixup-prob: the Beta distribution's parameter (small: lam near 1)")
    consistency: float = option(
        0.0, type=float, metavar="W",
        help="draw half a batch of clips and augment each twice (its own pitch, speed, noise, "
             "shift, context and warp), and add W times the Jensen-Shannon divergence between "
             "the two views' predictions to the loss: the same word in two made-up voices "
             "must get the same answer (default 0: off; try 2-10)")
    consistency_scope: str = option(
        "all", choices=("all", "keywords"),
        help="with --consistency: 'all' compares the views over every class and clip; 'keywords' "
             "only on keyword clips and over the keyword classes renormalized, so the views must "
             "agree on which keyword it is but not on whether it is one (default all)")
    class_boost: list = option(
        [], action="append", metavar="WORD=F",
        help="draw class WORD F times as often as the class balance would (F > 0), taken in proportion "
             "from the other classes; repeatable, e.g. --class-boost go=2 --class-boost no=1.5")
    val_stream: list = option(
        None, nargs=2, metavar=("WAV", "CSV"),
        help="a continuous recording of validation voices and its labels (make_stream.py): "
             "keep the checkpoint with the best recall there at <= --val-max-fa false alarms "
             "per keyword-free hour (as tune_detection.py tunes it; ties: validation accuracy) "
             "instead of the best validation accuracy")
    val_max_fa: float = option(
        5.0, type=float, metavar="N",
        help="with --val-stream: false alarms per keyword-free hour allowed (default 5)")
    weight_average: Optional[float] = option(
        None, type=float, metavar="DECAY",
        help="keep an exponential moving average of the weights (and BatchNorm statistics) with "
             "this decay per step, e.g. 0.999; validation, the kept checkpoint (best.pt) and "
             "so the converted model use the average (default: off)")
    patch_norm: str = option(
        "none", choices=mt.PATCH_NORMS,
        help="running_mean: the log-power features less their running mean per channel "
             "(a streaming cepstral-mean-style normalization; needs a log-power preset)")
    patch_norm_decay: float = option(
        0.01, type=float, metavar="A",
        help="with --patch-norm running_mean: weight of each new token in the mean (default 0.01, "
             "about 1 s at 100 tokens/s)")
    teacher_targets: Optional[str] = option(
        None, metavar="NPZ",
        help="the teacher classifier's logits for training clips (python3 -m mega_kws_tools.teacher.targets), "
             "for --distill")
    distill: float = option(
        0.0, type=float, metavar="W",
        help="with --teacher-targets: add W times the distillation term (T^2 times the KL divergence from the "
             "teacher's softmax at temperature T to the student's) on the clips the teacher has logits for "
             "(default 0: off)")
    unlabeled: list = option(
        [], action="append", metavar="NPZ",
        help="with --distill: two-second windows with no label and the teacher's logits for each "
             "(python3 -m mega_kws_tools.teacher.unlabeled), taught by the distillation term alone; repeatable")
    unlabeled_share: float = option(
        0.2, type=float, metavar="S", help="with --unlabeled: the share of each batch drawn from them (default 0.2)")
    distill_temperature: float = option(
        2.0, type=float, metavar="T", help="with --distill: the temperature T of both softmaxes (default 2)")
    init: Optional[str] = option(
        None, metavar="CKPT",
        help="start from this checkpoint's weights (same preset) with a fresh optimizer "
             "and schedule: fine-tuning, e.g. on more data; a .mega model file works too "
             "(e.g. models/sc10-demo.mega, unpacked by tools/mega_kws_tools/convert/mega_unpack.py)")

    def boosts(self) -> dict:
        """--class-boost as {word: factor} (checked by problem())."""
        return {item.partition("=")[0]: float(item.partition("=")[2]) for item in self.class_boost}

    def nonspeech_kind_weights(self):
        """--nonspeech-weight as the probability of each of NONSPEECH_KINDS, or
        None when not given (checked by problem())."""
        if not self.nonspeech_weight:
            return None
        named = {item.partition("=")[0]: float(item.partition("=")[2]) for item in self.nonspeech_weight}
        w = [named.get(kind, 1.0) for kind in NONSPEECH_KINDS]
        return [v / sum(w) for v in w] if sum(w) > 0 else w

    def _nonspeech_weight_problems(self):
        for item in self.nonspeech_weight:
            kind, _, weight = item.partition("=")
            try:
                ok = kind in NONSPEECH_KINDS and 0 <= float(weight) < math.inf
            except ValueError:
                ok = False
            if not ok:
                yield (f"--nonspeech-weight {item}: expected KIND=W with KIND one of {', '.join(NONSPEECH_KINDS)} "
                       "and W a number of at least 0")
                return
        if self.nonspeech_weight and (self.nonspeech_negatives <= 0 or sum(self.nonspeech_kind_weights()) == 0):
            yield "--nonspeech-weight needs --nonspeech-negatives F > 0 and a kind of weight above 0"

    def problem(self) -> Optional[str]:
        """The first setting that is out of range or does not combine with another,
        as the command line reports it, or None."""
        return next(itertools.chain(self._schedule_problems(), self._combination_problems(),
                                    self._value_problems()), None)

    def _schedule_problems(self):
        if self.weight_average is not None and not 0.0 < self.weight_average < 1.0:
            yield f"--weight-average {self.weight_average}: must be between 0 and 1 (exclusive)"
        if self.prefetch < 0:
            yield f"--prefetch {self.prefetch}: must be 0 (off) or more batches"
        if self.stop_at is not None and not 0 < self.stop_at <= self.steps:
            yield f"--stop-at {self.stop_at}: must be a step of the run, 1 to --steps {self.steps}"
        if self.extra_share is not None and not self.extra_data:
            yield "--extra-share needs --extra-data"
        if not 0.0 <= self.mixup_prob <= 1.0:
            yield f"--mixup-prob {self.mixup_prob}: must be between 0 and 1"
        if not self.mixup_alpha > 0:
            yield f"--mixup-alpha {self.mixup_alpha}: must be above 0"
        if self.mixup_prob > 0 and self.consistency > 0:
            yield ("--mixup-prob does not combine with --consistency (its two views of a clip would be mixed "
                   "with different partners)")
        if self.distill > 0 and self.mixup_prob > 0:
            yield "--distill does not combine with --mixup-prob (a mixed clip is not the one the teacher heard)"
        if (self.distill > 0) != bool(self.teacher_targets):
            yield "--distill W > 0 and --teacher-targets NPZ go together (the term and the teacher's answers)"
        if not (self.distill >= 0 and math.isfinite(self.distill)) or not self.distill_temperature > 0:
            yield (f"--distill {self.distill} / --distill-temperature {self.distill_temperature}: the weight must "
                   f"be a number of at least 0, the temperature above 0")
        if self.consistency < 0:
            yield f"--consistency {self.consistency}: must be at least 0"
        if self.unlabeled and (self.distill <= 0 or self.consistency > 0 or self.voice_adversary > 0):
            yield ("--unlabeled needs --distill W > 0 (the term that teaches them) and does not combine with "
                   "--consistency or --voice-adversary (a window has no label and no one voice)")

    def _combination_problems(self):
        if not (self.voice_adversary >= 0 and math.isfinite(self.voice_adversary)):
            yield f"--voice-adversary {self.voice_adversary}: must be a number of at least 0"
        if self.voice_adversary_ramp < 0:
            yield f"--voice-adversary-ramp {self.voice_adversary_ramp}: must be 0 or more steps"
        if self.voice_adversary > 0 and (self.mixup_prob > 0 or self.hard_examples):
            yield ("--voice-adversary does not combine with --mixup-prob or --hard-examples (a mixed clip "
                   "or a mined window has no one voice)")
        if self.consistency > 0 and (self.batch < 2 or self.batch % 2):
            yield f"--consistency needs an even --batch (two views of each clip), not {self.batch}"
        if self.consistency_scope != "all" and self.consistency == 0:
            yield f"--consistency-scope {self.consistency_scope} needs --consistency W (the term it scopes)"
        if self.consistency > 0 and (self.hard_examples or self.splice_prob > 0 or self.nonspeech_negatives > 0):
            yield ("--consistency does not combine with --hard-examples, --splice-prob or --nonspeech-negatives "
                   "(each changes a clip's label in one view only)")
        if self.nonspeech_audio and self.nonspeech_negatives <= 0:
            yield "--nonspeech-audio needs --nonspeech-negatives F > 0 (the share of examples its slices replace)"
        if self.nonspeech_negatives > 0 and (self.classes != "kws12" or self.voice_adversary > 0):
            yield ("--nonspeech-negatives needs --classes kws12 (its sounds are _silence_) and does not combine "
                   "with --voice-adversary (a generated sound has no voice)")

    def _value_problems(self):
        for item in self.class_boost:
            try:
                factor = float(item.partition("=")[2])
            except ValueError:
                yield f"--class-boost {item}: expected WORD=F with a number F, e.g. go=2"
                continue
            if not factor > 0 or not math.isfinite(factor):
                yield f"--class-boost {item}: the factor must be a positive number"
        yield from self._nonspeech_weight_problems()
        if not 0.0 <= self.label_smoothing < 1.0:
            yield f"--label-smoothing {self.label_smoothing}: must be at least 0 and below 1"
        if self.babble_prob > 0 and self.noise_prob <= 0:
            yield "--babble-prob needs --noise-prob P > 0 (it decides what the noise is, not how often)"
        if self.babble_prob > 0 and self.classes != "kws12":
            yield "--babble-prob needs --classes kws12 (its babble is _unknown_ words)"
        defaults = {f.name: f.default_factory() for f in dataclasses.fields(self) if f.name.endswith("_range")}
        for name, prob in (("speed_range", "speed_prob"), ("warp_range", "warp_prob")):
            flag, lo, hi = "--" + name.replace("_", "-"), *getattr(self, name)
            if not (math.isfinite(lo) and math.isfinite(hi) and RANGE_LIMITS[0] <= lo < hi <= RANGE_LIMITS[1]):
                yield f"{flag} {lo:g} {hi:g}: needs {RANGE_LIMITS[0]:g} <= LO < HI <= {RANGE_LIMITS[1]:g}"
            if [lo, hi] != defaults[name] and getattr(self, prob) <= 0:
                yield f"{flag} needs --{prob.replace('_', '-')} P > 0 (it sets the factors, not how often)"
        for name in PROBABILITIES:
            if getattr(self, name) is not None and not 0.0 <= getattr(self, name) <= 1.0:
                yield f"--{name.replace('_', '-')} {getattr(self, name)}: must be between 0 and 1"


def parser(description: str = None) -> argparse.ArgumentParser:
    """The command line of TrainConfig: one option per field."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(TrainConfig):
        settings = dict(f.metadata)
        if f.type == "bool" or f.type is bool:
            settings["action"] = "store_true"
        elif not settings.get("required"):
            settings["default"] = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        ap.add_argument("--" + f.name.replace("_", "-"), **settings)
    return ap


def parse(argv=None, description: str = None) -> TrainConfig:
    """A TrainConfig from command-line arguments; exits with argparse's usage
    message (status 2) on a bad or out-of-range option, as train.py always has."""
    ap = parser(description)
    cfg = TrainConfig(**vars(ap.parse_args(argv)))
    why = cfg.problem()
    if why:
        ap.error(why)
    return cfg

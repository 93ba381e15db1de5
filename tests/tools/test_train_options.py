# SPDX-License-Identifier: Apache-2.0
"""train.py and voice_norm_check.py refuse bad option values and combinations with a
message that names the option, before any training (run in-process, on the generated
dataset where they get as far as reading it)."""

import sys

import pytest

from mega_kws_tools.training import train
from mega_kws_tools.training import voice_norm_check as VNC

# what test_train_smoke.sh's runs use: every augmentation at 0.5
AUG = ("--preset smoke --steps 20 --batch 16 --warmup 5 --max-per-class 2 --eval-every 10 --threads 1 --seed 7 "
       "--noise-prob 0.5 --speed-prob 0.5 --color-prob 0.5 --vowel-prob 0.5 --pitch-prob 0.5 --warp-prob 0.5 "
       "--mask-prob 0.5").split()


def refused(main, argv, capsys, monkeypatch):
    """the stderr of main() run with argv, which must fail"""
    monkeypatch.setattr(sys, "argv", argv)
    try:
        rc = main()
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc not in (0, None), f"{' '.join(argv[1:])} was accepted"
    return err


def without(args, *drop):
    """args less the option drop[0] and its value"""
    i = args.index(drop[0])
    return args[:i] + args[i + 2:]


@pytest.fixture
def train_cmd(dataset, tmp_path):
    return ["train.py", "--data", dataset, "--classes", "kws12", "--out", str(tmp_path / "run")] + AUG


@pytest.mark.parametrize("bad, message", [
    ("--prefetch -1", "prefetch -1: must be 0 (off) or more batches"),
    ("--batch 15 --consistency 1", "consistency needs an even --batch (two views of each clip), not 15"),
    ("--consistency-scope keywords", "--consistency-scope keywords needs --consistency W"),
    ("--class-boost go=0", "--class-boost"),
    ("--class-boost go=x", "--class-boost"),
    ("--class-boost zebra=2", "zebra: not a class of this run"),
    ("--mixup-prob 1.5", "--mixup-"),
    ("--mixup-prob 0.5 --mixup-alpha 0", "--mixup-"),
    ("--mixup-prob 0.5 --consistency 4", "--mixup-"),
    ("--voice-adversary -1", "--voice-adversary"),
    ("--voice-adversary 0.5 --voice-adversary-ramp -1", "--voice-adversary"),
    ("--voice-adversary 0.5 --mixup-prob 0.5", "--voice-adversary"),
    ("--speed-range 1.2 0.9", "-range"),
    ("--warp-range 1 1", "-range"),
    ("--warp-range 0.3 1.2", "-range"),
    ("--speed-range 1 2.5", "-range"),
    ("--speed-range nan 1.2", "-range"),
    ("--speed-range 0.9", "-range"),
    ("--weight-average 1", "must be between 0 and 1"),
    ("--label-smoothing 1", "must be at least 0 and below 1"),
    ("--nonspeech-negatives 1.5", "--nonspeech-negatives 1.5: must be between 0 and 1"),
    ("--nonspeech-negatives 0.2 --consistency 2", "does not combine with --hard-examples, --splice-prob or --nonspeech"),
    ("--nonspeech-negatives 0.2 --voice-adversary 0.5", "--nonspeech-negatives needs --classes kws12"),
    ("--nonspeech-negatives 0.2 --classes sc10", "--nonspeech-negatives needs --classes kws12"),
    ("--nonspeech-audio x.wav", "--nonspeech-audio needs --nonspeech-negatives F > 0"),
    ("--nonspeech-weight beeps=3", "--nonspeech-weight needs --nonspeech-negatives F > 0"),
    ("--nonspeech-negatives 0.2 --nonspeech-weight beep=3", "--nonspeech-weight beep=3: expected KIND=W"),
    ("--nonspeech-negatives 0.2 --nonspeech-weight beeps=-1", "--nonspeech-weight beeps=-1: expected KIND=W"),
    ("--nonspeech-negatives 0.2 --nonspeech-weight beeps=nan", "--nonspeech-weight beeps=nan: expected KIND=W"),
    ("--nonspeech-negatives 0.2 --nonspeech-audio /no/such/music.wav", "--nonspeech-audio: /no/such/music.wav: no such file or folder"),
])
def test_train_refuses(train_cmd, capsys, monkeypatch, bad, message):
    assert message in refused(train.main, train_cmd + bad.split(), capsys, monkeypatch)


@pytest.mark.parametrize("bad, needs", [
    ("--babble-prob 0.5", "--noise-prob"),
    ("--speed-range 0.8 1.2", "--speed-prob"),
    ("--warp-range 0.8 1.2", "--warp-prob"),
])
def test_an_option_without_the_one_it_needs_is_refused(train_cmd, capsys, monkeypatch, bad, needs):
    err = refused(train.main, without(train_cmd, needs) + bad.split(), capsys, monkeypatch)
    assert f"{bad.split()[0]} needs {needs} P > 0" in err, err


def test_voice_norm_check_refuses_an_alpha_above_1(dataset, tmp_path, capsys, monkeypatch):
    argv = ["voice_norm_check.py", "--data", dataset, "--alphas", "2", str(tmp_path / "none.pt")]
    assert "--alphas 2: each between 0 and 1" in refused(VNC.main, argv, capsys, monkeypatch)

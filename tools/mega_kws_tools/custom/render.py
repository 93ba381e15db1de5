# SPDX-License-Identifier: Apache-2.0
"""Text to speech for a custom keyword: the project's English voices (espeak-ng's
English accents with its voice variants, flite's kal and kal16, festival's
kal_diphone), each word trimmed and, when longer than the model's window
allows, sped up a little.

Voices follow the project's voice splits (data/voices.py): the training ones
train; espeak-ng en-gb-x-rp (a validation voice) tunes the detection defaults;
espeak-ng en-029 (a testing voice) gives the hold-out figure the command
prints. The reserved voices are refused by data/voices.check_allowed as
everywhere else.
"""

import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mega_kws_tools.data import festival_pipe
from mega_kws_tools.data import voices as vc
from mega_kws_tools.data.sc10_audio import load_16k, sox_tempo, trim
from mega_kws_tools.data.sc10_clips import espeak_variants
from mega_kws_tools.data.sc10_recipe import (F0_RANGE, MAX_TEMPO, MIN_WORD_S, PITCH_RANGE, RATE_RANGE, SR,
                                             STRETCH_RANGE)

TUNE_VOICE = "en-gb-x-rp"   # a validation-split voice: the detection defaults are tuned on it
TEST_VOICE = "en-029"       # a testing-split voice: the figure the command prints
MAX_WORD_S = 0.95           # what fits the demo backbone's 1 s window with a margin


def training_voices():
    """[(engine, voice)] of the English training voices."""
    out = [("espeak-ng", v) for v in vc.ESPEAK_ENGLISH if v not in (TUNE_VOICE, TEST_VOICE)]
    for v in vc.VOICES:
        if v.engine != "espeak-ng" and v.script == "english" and vc.split_of(v) == "training":
            out.append((v.engine, v.name))
    return out


def draw_setting(rng: np.random.Generator, engine: str, voice: str, variants) -> dict:
    """One speaker setting of a voice: an espeak-ng variant, rate and pitch, or
    flite's and festival's duration stretch (and flite's pitch)."""
    vc.check_allowed(engine, voice)
    if engine == "espeak-ng":
        variant = str(variants[int(rng.integers(len(variants)))]) if variants and rng.random() > 0.05 else ""
        return dict(engine=engine, voice=voice, variant=variant,
                    rate=int(rng.integers(RATE_RANGE[0], RATE_RANGE[1] + 1)),
                    pitch=int(rng.integers(PITCH_RANGE[0], PITCH_RANGE[1] + 1)))
    stretch = round(float(rng.uniform(*STRETCH_RANGE)), 2)
    pitch = int(rng.integers(F0_RANGE[0], F0_RANGE[1] + 1)) if engine == "flite" else 0
    return dict(engine=engine, voice=voice, variant="", rate=stretch, pitch=pitch)


def _command(spk: dict, text: str, out: str):
    if spk["engine"] == "espeak-ng":
        v = spk["voice"] + (f"+{spk['variant']}" if spk["variant"] else "")
        return ["espeak-ng", "-v", v, "-s", str(spk["rate"]), "-p", str(spk["pitch"]), "-w", out, text]
    return ["flite", "-voice", spk["voice"], "--setf", f"duration_stretch={spk['rate']}",
            "--setf", f"int_f0_target_mean={spk['pitch']}", "-t", text, "-o", out]


def synthesize(spk: dict, text: str, timeout: float = 60.0) -> np.ndarray:
    """`text` said by one setting: float32 at 16 kHz, untrimmed (empty on failure).
    Each call has its own temporary folder, so calls may run in threads."""
    vc.check_allowed(spk["engine"], spk["voice"], spk["variant"])
    with tempfile.TemporaryDirectory(prefix="mega-custom-") as tmp:
        out = os.path.join(tmp, "tts.wav")
        if spk["engine"] == "festival":
            txt = os.path.join(tmp, "tts.txt")
            with open(txt, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            ok = festival_pipe.text2wave(spk["voice"], spk["rate"], txt, out, timeout)
        else:
            try:
                ok = subprocess.run(_command(spk, text, out), capture_output=True, timeout=timeout).returncode == 0
            except subprocess.TimeoutExpired:
                ok = False
        if not ok or not os.path.exists(out) or os.path.getsize(out) <= 44:
            return np.zeros(0, np.float32)
        return load_16k(out)


def fit(x: np.ndarray, rng: np.random.Generator):
    """A trimmed rendering that fits MAX_WORD_S (sped up by at most MAX_TEMPO),
    or (None, why)."""
    x = trim(x)
    if len(x) < MIN_WORD_S * SR:
        return None, "empty"
    if len(x) > MAX_WORD_S * SR:
        tempo = len(x) / (rng.uniform(0.85, 0.93) * SR)
        if tempo > MAX_TEMPO:
            return None, "too long"
        x = trim(sox_tempo(x, tempo))
        if not (MIN_WORD_S * SR <= len(x) <= MAX_WORD_S * SR):
            return None, "too long"
    return x.astype(np.float32), ""


def render_all(jobs, seed: int, threads: int = 2, progress=None):
    """jobs: [(text, spk)]. Returns [(index, audio)] of the renderings that fit
    and a list of (text, why) of those that did not; `progress(done)` after each."""
    def one(i):
        text, spk = jobs[i]
        x, why = fit(synthesize(spk, text), np.random.default_rng([seed, i]))
        return i, x, why
    ok, failed = [], []
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for done, (i, x, why) in enumerate(pool.map(one, range(len(jobs))), 1):
            if x is None:
                failed.append((jobs[i][0], why))
            else:
                ok.append((i, x))
            if progress:
                progress(done)
    return ok, failed


def plan(texts, voices, per_text: int, rng: np.random.Generator, variants=None):
    """[(text, spk)]: each text said `per_text` times, the voices taken in turn
    (each with a fresh setting)."""
    variants = espeak_variants() if variants is None else variants
    jobs = []
    for text in texts:
        for k in range(per_text):
            engine, voice = voices[(k + len(jobs)) % len(voices)]
            jobs.append((text, draw_setting(rng, engine, voice, variants)))
    return jobs

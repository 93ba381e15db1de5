# SPDX-License-Identifier: Apache-2.0
"""make_sc10's clips: one speech, silence or babble-bank clip from its own seed (do_task, what
the worker processes run), the voice probes, and the espeak-ng variants and tool versions."""

import hashlib
import os
import re
import subprocess

import numpy as np

from mega_kws_tools.audio import write_wav
from mega_kws_tools.data.layout import SILENCE, UNKNOWN
from mega_kws_tools.data.sc10_audio import (band_limit, colored_noise, db, draw_band, hum, peak, reverb, rms,
                                            to_pcm16, trim)
from mega_kws_tools.data.sc10_recipe import (
    ACCENT, BABBLE_CODE, CLIP, EXTRA, LABELS, LEVEL_RANGE_DBFS, MIN_WORD_S, NEAR, P_BAND, P_NOISE, P_REVERB,
    PROBE_RETRIES, PROBE_RETRY_TIMEOUT_S, SNRS_DB, SPEECH_NOISES, SR, clip_name, clip_rng)
from mega_kws_tools.data.sc10_render import (G, draw_split, label_code, make_noise, render_word, speaker_id,
                                             synthesize)


# ----------------------------------------------------------------------------- clip makers

def make_speech_clip(seed: int, label: str, index: int) -> dict:
    """Clip `index` of `label` (a keyword, UNKNOWN, NEAR: an UNKNOWN clip of a near-miss word,
    or ACCENT: a keyword clip in an accent)."""
    prefix = EXTRA[label][1] if label in EXTRA else ""
    rng = clip_rng(seed, label_code(label), index)
    split = draw_split(rng)
    fails = []
    got = render_word(rng, label, split, fails)
    if got is None:
        return dict(row=None, fails=fails, error=f"{label}/{index}: could not render it with a {split} voice")
    spk, word, text, w, tempo, wf = got

    guard = min(int(0.02 * SR), (CLIP - len(w)) // 2)  # keep >= 20 ms (when possible) from the clip edges
    offset = int(rng.integers(guard, CLIP - len(w) - guard + 1))
    x = np.zeros(CLIP, np.float32)
    x[offset: offset + len(w)] = w
    rev = ""
    if rng.random() < P_REVERB:
        x, rev = reverb(rng, x)
    band = draw_band(rng) if rng.random() < P_BAND else ""
    x = band_limit(x, band)
    speech_rms = rms(x[offset: offset + len(w)])
    noise_kind, snr = "", None
    mix = x
    if rng.random() < P_NOISE:
        noise_kind = str(rng.choice(SPEECH_NOISES))
        snr = int(rng.choice(SNRS_DB))
        nz = band_limit(make_noise(rng, CLIP, noise_kind), band)
        mix = x + nz * np.float32(speech_rms / max(rms(nz), 1e-12) * 10 ** (-snr / 20))
    g = 10 ** (rng.uniform(*LEVEL_RANGE_DBFS) / 20) / max(peak(x), 1e-9)
    mix = mix * np.float32(g)
    if peak(mix) > 0.98:  # keep inside [-1, 1) without hard clipping
        g *= 0.98 / peak(mix)
        mix *= np.float32(0.98 / peak(mix))
    level = db(peak(x) * g)

    name = clip_name(speaker_id(spk), index, prefix)
    label = {NEAR: UNKNOWN, ACCENT: word}.get(label, label)
    rel = f"{label}/{name}"
    write_wav(os.path.join(G["out"], rel), to_pcm16(rng, mix))
    row = dict(path=rel, label=label, split=split, engine=spk["engine"], voice=spk["voice"],
               variant=spk["variant"], rate=spk["rate"], pitch=spk["pitch"], snr_db="" if snr is None else snr,
               reverb=rev, band=band, level_dbfs=f"{level:.1f}", offset_s=f"{offset / SR:.4f}", word=word,
               word_dur_s=f"{len(w) / SR:.4f}", tempo=f"{tempo:.3f}", noise=noise_kind, text=text,
               warp=f"{wf:.3f}")
    return dict(row=row, fails=fails, error=None)


SILENCE_KINDS = ["white", "pink", "brown", "hum", "noise+hum", "digital"]
SILENCE_P = [0.15, 0.17, 0.13, 0.15, 0.2, 0.2]


def make_silence_clip(seed: int, index: int) -> dict:
    rng = clip_rng(seed, LABELS.index(SILENCE), index)
    split = draw_split(rng)
    kind = str(rng.choice(SILENCE_KINDS, p=SILENCE_P))
    if kind == "digital":
        x = colored_noise(rng, CLIP, "white") * np.float32(10 ** (rng.uniform(-100, -80) / 20))
    else:
        if kind == "noise+hum":
            nz = colored_noise(rng, CLIP, str(rng.choice(["white", "pink", "brown"])))
            x = nz + hum(rng, CLIP) * np.float32(10 ** (rng.uniform(-12, 6) / 20))
            x /= rms(x)
        else:
            x = make_noise(rng, CLIP, kind)
        x = x * np.float32(10 ** (rng.uniform(-60, -20) / 20))
    band = draw_band(rng) if (kind != "digital" and rng.random() < P_BAND) else ""
    x = band_limit(x, band)
    variant = ""
    if rng.random() < 0.15:  # clicks / short bursts
        variant = "clicks"
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, CLIP - 600))
            a = 10 ** (rng.uniform(-45, -12) / 20)
            if rng.random() < 0.5:
                m = int(rng.integers(1, 4))
                x[pos: pos + m] += np.float32(a * rng.choice([-1.0, 1.0]))
            else:
                m = int(rng.uniform(0.002, 0.03) * SR)
                burst = rng.standard_normal(m) * np.exp(-np.arange(m) / (m / 4))
                x[pos: pos + m] += (a * burst / max(peak(burst), 1e-12)).astype(np.float32)
    if peak(x) > 0.98:
        x *= np.float32(0.98 / peak(x))
    pcm = to_pcm16(rng, x)
    spk = f"noise:{kind}:{variant}"
    name = clip_name(spk, index)
    rel = f"{SILENCE}/{name}"
    write_wav(os.path.join(G["out"], rel), pcm)
    row = dict(path=rel, label=SILENCE, split=split, engine="noise", voice=kind, variant=variant,
               rate="", pitch="", snr_db="", reverb="", band=band,
               level_dbfs=f"{db(rms(pcm.astype(np.float32) / 32768.0)):.1f}", offset_s="", word="",
               word_dur_s="", tempo="", noise=kind, text="", warp="")
    return dict(row=row, fails=[], error=None)


def bank_word(seed: int, index: int):
    """One babble-bank word: an unrelated word, any engine, peak-normalized."""
    rng = clip_rng(seed, BABBLE_CODE, index)
    got = render_word(rng, UNKNOWN, "training", [], max_s=2.0)  # training voices only
    if got is None:
        return None
    return (got[3] / max(peak(got[3]), 1e-9)).astype(np.float32)


def do_task(task):
    kind, seed, label, index = task
    if kind == "bank":
        return bank_word(seed, index)
    if kind == "probe":  # index: the render's timeout in seconds
        spk = dict(engine=label[0], voice=label[1], variant=label[2],
                   rate=175 if label[0] == "espeak-ng" else 1.0, pitch=50 if label[0] == "espeak-ng" else 100)
        x = synthesize(spk, label[3], index)
        return (label[:3], len(trim(x)) / SR, hashlib.sha1(x.tobytes()).hexdigest())
    try:
        if label == SILENCE:
            return make_silence_clip(seed, index)
        return make_speech_clip(seed, label, index)
    except Exception as e:  # keep going; reported at the end
        return dict(row=None, fails=[], error=f"{label}/{index}: {type(e).__name__}: {e}")


# ----------------------------------------------------------------------------- probes, the engines, the pool

def espeak_variants():
    """Variant names = file names in espeak-ng-data/voices/!v (some contain spaces, e.g. 'Mr serious')."""
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Data at:\s*(\S+)", out)
    d = os.path.join(m.group(1), "voices", "!v") if m else ""
    if d and os.path.isdir(d):
        return sorted(f for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))
    listing = subprocess.run(["espeak-ng", "--voices=variant"], capture_output=True, text=True).stdout.splitlines()
    return sorted({ln.split()[4].replace("!v/", "") for ln in listing[1:] if len(ln.split()) >= 5})


def tool_versions():
    ev = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout.strip().split("  Data")[0]
    fv = [ln.strip().replace("version: ", "") for ln in
          subprocess.run(["flite", "--version"], capture_output=True, text=True).stdout.splitlines() if "version" in ln]
    sv = subprocess.run(["sox", "--version"], capture_output=True, text=True).stdout.strip()
    return ev, (fv[0] if fv else "flite"), sv


def run_tasks(pool, tasks, chunksize=8):
    if pool is None:
        return map(do_task, tasks)
    return pool.imap(do_task, tasks, chunksize=chunksize)


def run_probes(pool, probes):
    """The probe tasks' results, in order. A voice that failed is probed again, alone and with a
    long timeout, PROBE_RETRIES times: on a loaded machine (or at nice 19 beside other work)
    festival can take over a minute to load a voice, and dropping an installed voice would
    silently give every split other voices and other clips."""
    res = list(run_tasks(pool, probes, 4))
    for i, r in enumerate(res):
        for _ in range(PROBE_RETRIES):
            if r[1] >= MIN_WORD_S:
                break
            r = do_task(("probe", 0, probes[i][2], PROBE_RETRY_TIMEOUT_S))
        res[i] = r
    return res


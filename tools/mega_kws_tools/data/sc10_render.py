# SPDX-License-Identifier: Apache-2.0
"""make_sc10's rendering: the run's shared state G (voices, variants, babble bank, folders;
filled in the parent before the worker processes fork), drawing a clip's split, voice and
word, text-to-speech through espeak-ng, flite and festival, and babble noise."""

import os
import subprocess

import numpy as np

from mega_kws_tools.data import festival_pipe
from mega_kws_tools.data import voices as vc
from mega_kws_tools.data.layout import KEYWORDS, UNKNOWN
from mega_kws_tools.data.sc10_audio import colored_noise, hum, load_16k, rms, sox_tempo, trim, warp
from mega_kws_tools.data.sc10_recipe import (
    ACCENT, CONFUSABLE, EXTRA, F0_RANGE, LABELS, MAX_TEMPO, MAX_WORD_S, MIN_WORD_S, NEAR, P_NO_VARIANT, P_WARP,
    PITCH_RANGE, RATE_RANGE, RENDER_TIMEOUT_S, SC_OTHER, SR, STRETCH_RANGE, TEST_PCT, UNKNOWN_WORDS, VAL_PCT,
    WARP_RANGE, clip_rng)

# Filled in the parent before the worker processes fork.
G = {"variants": [], "voices": {}, "bank": [], "tmp_root": None, "out": None, "festival": "text2wave"}
FESTIVAL = festival_pipe.Renderer()


# ----------------------------------------------------------------------------- babble

def babble(rng: np.random.Generator, n: int) -> np.ndarray:
    """Sum of 4..8 overlapping unrelated words from the babble bank, unit RMS."""
    bank = G["bank"]
    if not bank:
        return colored_noise(rng, n, "pink")
    y = np.zeros(n, np.float32)
    for _ in range(int(rng.integers(4, 9))):
        w = bank[int(rng.integers(len(bank)))]
        pos = int(rng.integers(-len(w) // 2, n))
        a, b = max(0, pos), min(n, pos + len(w))
        if b > a:
            y[a:b] += w[a - pos: b - pos] * np.float32(10 ** (rng.uniform(-8, 0) / 20))
    if rms(y) < 1e-6:
        return colored_noise(rng, n, "pink")
    return y / rms(y)


def make_noise(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind == "hum":
        return hum(rng, n)
    if kind == "babble":
        return babble(rng, n)
    return colored_noise(rng, n, kind)


# ----------------------------------------------------------------------------- TTS

def tmp_dir() -> str:
    d = os.path.join(G["tmp_root"], str(os.getpid()))
    os.makedirs(d, exist_ok=True)
    return d


def synthesize(spk: dict, text: str, timeout: float = RENDER_TIMEOUT_S) -> np.ndarray:
    """Render `text` with the given engine settings; float32 at 16 kHz, untrimmed (empty on failure,
    or when the engine takes longer than `timeout` seconds)."""
    vc.check_allowed(spk["engine"], spk["voice"], spk["variant"])
    out = os.path.join(tmp_dir(), "tts.wav")
    if os.path.exists(out):
        os.remove(out)
    if spk["engine"] == "espeak-ng":
        v = spk["voice"] + (f"+{spk['variant']}" if spk["variant"] else "")
        cmd = ["espeak-ng", "-v", v, "-s", str(spk["rate"]), "-p", str(spk["pitch"]), "-w", out, text]
    elif spk["engine"] == "flite":
        cmd = ["flite", "-voice", spk["voice"], "--setf", f"duration_stretch={spk['rate']}",
               "--setf", f"int_f0_target_mean={spk['pitch']}", "-t", text, "-o", out]
    else:  # festival: the text from a file (UTF-8), duration stretch as a parameter
        txt = os.path.join(tmp_dir(), "tts.txt")
        with open(txt, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        render = FESTIVAL.render if G["festival"] == "pipe" else festival_pipe.text2wave
        ok = render(spk["voice"], spk["rate"], txt, out, timeout)
        return load_16k(out) if ok and os.path.exists(out) and os.path.getsize(out) > 44 else np.zeros(0, np.float32)
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return np.zeros(0, np.float32)
    if r.returncode != 0 or not os.path.exists(out) or os.path.getsize(out) <= 44:
        return np.zeros(0, np.float32)
    return load_16k(out)


def draw_voice(rng: np.random.Generator, split: str, latin_only: bool = False,
               english_espeak: bool = False) -> "vc.Voice":
    """A voice of `split`: a family by FAMILY_WEIGHTS (among those the split has), then a voice of it;
    with latin_only, among the voices that read Latin script; with english_espeak, among
    espeak-ng's English voices."""
    pool = [v for v in G["voices"][split] if (v.script in vc.LATIN or not latin_only)
            and (not english_espeak or (v.engine == "espeak-ng" and v.script == "english"))]
    fams = sorted({v.family for v in pool})
    w = np.array([vc.FAMILY_WEIGHTS[f] for f in fams])
    fam = fams[int(rng.choice(len(fams), p=w / w.sum()))]
    cands = [v for v in pool if v.family == fam]
    return cands[int(rng.integers(len(cands)))]


def draw_speaker(rng: np.random.Generator, split: str, latin_only: bool = False,
                 english_espeak: bool = False) -> dict:
    v = draw_voice(rng, split, latin_only, english_espeak)
    spk = dict(engine=v.engine, voice=v.name, variant="", obj=v)
    if v.engine == "flite":
        spk.update(rate=round(float(rng.uniform(*STRETCH_RANGE)), 2), pitch=int(rng.integers(F0_RANGE[0], F0_RANGE[1] + 1)))
    elif v.engine == "festival":
        spk.update(rate=round(float(rng.uniform(*STRETCH_RANGE)), 2), pitch="")
    else:
        variants = G["variants"]
        spk.update(variant="" if (rng.random() < P_NO_VARIANT or not variants) else str(variants[int(rng.integers(len(variants)))]),
                   rate=int(rng.integers(RATE_RANGE[0], RATE_RANGE[1] + 1)),
                   pitch=int(rng.integers(PITCH_RANGE[0], PITCH_RANGE[1] + 1)))
    return spk


def speaker_id(spk: dict) -> str:
    return f"{spk['engine']}:{spk['voice']}:{spk['variant']}"


def draw_other_word(rng: np.random.Generator, v: "vc.Voice", label: str) -> str:
    """The word an UNKNOWN clip (or a NEAR one: a CONFUSABLE word) of voice `v` says: one it
    can read, re-drawn while the voice would read it exactly as a keyword's respelling
    ("of" where off is respelled "of"), so that no _unknown_ clip is a keyword."""
    if label == NEAR:
        words = CONFUSABLE
    else:
        words = vc.unknown_words_for(v, UNKNOWN_WORDS)
        if v.script in vc.LATIN and rng.random() < 0.5:
            words = SC_OTHER
    word = str(words[int(rng.integers(len(words)))])
    while v.reads_as_keyword(word):
        word = str(words[int(rng.integers(len(words)))])
    return word


def render_word(rng: np.random.Generator, label: str, split: str, fails: list, max_s: float = MAX_WORD_S):
    """Draw a speaker of `split` and a word for `label` (the keyword, an unknown word the
    voice can read, for NEAR a CONFUSABLE word said by a Latin-script voice, for ACCENT a
    keyword said by an English espeak-ng voice in an accent of vc.ACCENT_PHONEMES), render,
    warp and trim it; returns (spk, word, text, audio, tempo, warp) or None after 6 tries."""
    for _ in range(6):
        spk = draw_speaker(rng, split, latin_only=label == NEAR, english_espeak=label == ACCENT)
        v = spk["obj"]
        if label == ACCENT:
            word = KEYWORDS[int(rng.integers(len(KEYWORDS)))]
            alts = vc.ACCENT_PHONEMES[word]
            text = f"[[{alts[int(rng.integers(len(alts)))]}]]"
        else:
            word = draw_other_word(rng, v, label) if label in (UNKNOWN, NEAR) else label
            text = v.text_for(word)
        x = trim(synthesize(spk, text))
        wf = float(rng.uniform(*WARP_RANGE)) if rng.random() < P_WARP else 1.0
        if wf != 1.0 and len(x):
            x = trim(warp(x, wf))
        if len(x) < MIN_WORD_S * SR:
            fails.append((speaker_id(spk), "empty"))
            continue
        tempo = 1.0
        if len(x) > max_s * SR:
            tempo = len(x) / (rng.uniform(0.85, 0.93) * SR)
            if tempo > MAX_TEMPO:
                fails.append((speaker_id(spk), "too long"))
                continue
            x = trim(sox_tempo(x, tempo))
            if not (MIN_WORD_S * SR <= len(x) <= max_s * SR):
                fails.append((speaker_id(spk), "tempo failed"))
                continue
        return spk, word, text, x, tempo, wf
    return None


def draw_split(rng: np.random.Generator) -> str:
    u = rng.random() * 100.0
    if G.get("training_only"):  # --pool more: every voice of it trains (the draw is kept all the same)
        return "training"
    return "validation" if u < VAL_PCT else "testing" if u < VAL_PCT + TEST_PCT else "training"


def label_code(label: str) -> int:
    """The SeedSequence code of `label`'s clips (a keyword, _unknown_, _silence_, NEAR or ACCENT)."""
    return EXTRA[label][0] if label in EXTRA else LABELS.index(label)


def split_of_clip(seed: int, label: str, index: int) -> str:
    """The split clip `index` of `label` falls in: a clip draws its split first from its own
    generator, so this costs one draw."""
    return draw_split(clip_rng(seed, label_code(label), index))


def indices_of_split(seed: int, label: str, split: str, first: int, n: int) -> list:
    """The first `n` clip indices >= `first` of `label` whose clip falls in `split`."""
    out, i = [], first
    while len(out) < n:
        if split_of_clip(seed, label, i) == split:
            out.append(i)
        i += 1
    return out


# SPDX-License-Identifier: Apache-2.0
"""make_sc10's recipe: the labels, the words each label's clips say, the numbers the
clips are drawn with (probabilities, ranges, timeouts), manifest.csv's columns, and how a
clip is named and seeded (make_sc10.py's docstring describes the whole recipe)."""

import hashlib
import os
import re

import numpy as np

from mega_kws_tools.data.layout import KEYWORDS, SILENCE, UNKNOWN

SR = 16000
CLIP = SR  # samples per clip (1.000 s)

LABELS = KEYWORDS + [UNKNOWN, SILENCE]

# The other Speech Commands v0.02 words.
SC_OTHER = ("bed bird cat dog eight five four happy house marvin nine one seven sheila six three tree two wow zero "
            "backward forward follow learn visual").split()
# Near misses of the keywords (a different consonant or vowel, or the keyword plus a
# coda). Exact homophones of a keyword ("know" = "no", "write" = "right" in espeak-ng)
# and words that start with a whole keyword ("often", "upper", "yesterday") are left
# out on purpose: they would be label noise.
NEAR_MISS = ("yeah yep yet guess chess "          # yes
             "now nose note nope snow oh "         # no
             "cup pup app hop "                    # up
             "town brown dawn done round "         # down
             "leaf lift loft let laugh "           # left
             "light bright ride white night rate "  # right
             "onto own an in gone don "            # on
             "of cough awful "                     # off
             "stock top shop step spot stuff "     # stop
             "goal goat gold show grow").split()   # go
COMMON = ("okay hey the and hello music weather please play next call time what turn volume open close start "
          "pause back home alarm timer good morning water computer maybe nothing sorry hi").split()
UNKNOWN_WORDS = SC_OTHER + NEAR_MISS + COMMON
assert not set(UNKNOWN_WORDS) & set(KEYWORDS)
# What --near-miss clips say: the near misses above and more of the same kind, among
# them the words validation found heard as keywords ("good", "call" -> go).
CONFUSABLE = NEAR_MISS + ("yell less mess "       # yes
                          "nor knob nod "          # no
                          "pub hub "               # up
                          "doubt bound "           # down
                          "lend theft "            # left
                          "rice ripe "             # right
                          "pawn "                  # on
                          "moth "                  # off
                          "stab stomp "            # stop
                          "good call cold code coat low").split()  # go
assert not set(CONFUSABLE) & set(KEYWORDS) and len(set(CONFUSABLE)) == len(CONFUSABLE)
NEAR = "_near_"              # task label of a --near-miss clip (an _unknown_ clip)
ACCENT = "_accent_"          # task label of an --accent clip (a keyword clip)
# The extra task labels: their SeedSequence label code and the prefix of a clip's
# index in its name (clip_name), e.g. <spk8>_n<index>_nohash_0.wav.
EXTRA = {NEAR: (1001, "n"), ACCENT: (1002, "a")}

P_NO_VARIANT = 0.05          # espeak-ng clips rendered with the bare voice
RATE_RANGE = (110, 220)      # espeak-ng -s
PITCH_RANGE = (20, 80)       # espeak-ng -p
STRETCH_RANGE = (0.8, 1.3)   # flite duration_stretch
F0_RANGE = (90, 160)         # flite int_f0_target_mean
P_WARP, WARP_RANGE = 0.5, (0.88, 1.15)  # resampling warp: pitch, formants and tempo together

MAX_WORD_S = 0.95            # longer words are sped up (sox tempo) ...
MAX_TEMPO = 1.6              # ... by at most this factor, else re-drawn
MIN_WORD_S = 0.08            # shorter "words" count as a failed rendering
RENDER_TIMEOUT_S = 60.0      # an engine that takes longer has failed the rendering
PROBE_RETRIES = 2            # a voice whose probe fails is probed again, alone, this many times
PROBE_RETRY_TIMEOUT_S = 600  # with this timeout for the engine
TRIM_DB = -40.0              # trim threshold relative to the loudest 5 ms frame
TRIM_MARGIN_S = 0.010

P_REVERB, P_BAND, P_NOISE = 0.3, 0.3, 0.7
SNRS_DB = [0, 5, 10, 20, 30]
SPEECH_NOISES = ["white", "pink", "brown", "babble", "hum"]
LEVEL_RANGE_DBFS = (-20.0, -3.0)

BABBLE_BANK_SIZE = 300
SHARD = 500                  # clips per resumable unit of work
BABBLE_CODE = 1000           # SeedSequence label code of the babble bank

VAL_PCT, TEST_PCT = 10.0, 10.0

MANIFEST_FIELDS = ["path", "label", "split", "engine", "voice", "variant", "rate", "pitch", "snr_db", "reverb",
                   "band", "level_dbfs", "offset_s", "word", "word_dur_s", "tempo", "noise", "text", "warp"]


# ----------------------------------------------------------------------------- clip names and seeds

def clip_name(speaker_id: str, index: int, prefix: str = "") -> str:
    return f"{hashlib.sha1(speaker_id.encode('utf-8')).hexdigest()[:8]}_{prefix}{index:05d}_nohash_0.wav"


def _named_with(path: str, prefix: str) -> bool:
    """Whether a clip's name is clip_name's with this index prefix: <spk8>_<prefix><index>_nohash_0.wav
    (a real Speech Commands name, <speaker>_nohash_<n>.wav, is not)."""
    return re.fullmatch(rf"[0-9a-f]{{8}}_{prefix}\d+_nohash_0\.wav", os.path.basename(path)) is not None


def is_near_miss(path: str) -> bool:
    """Whether a clip is a --near-miss clip, by its name."""
    return _named_with(path, EXTRA[NEAR][1])


def is_accent(path: str) -> bool:
    """Whether a clip is an --accent clip, by its name."""
    return _named_with(path, EXTRA[ACCENT][1])


def clip_rng(seed: int, code: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, code, index]))


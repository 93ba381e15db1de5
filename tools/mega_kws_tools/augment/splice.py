# SPDX-License-Identifier: Apache-2.0
"""Half-keyword near misses: a keyword's onset or coda spliced to another word's
(--splice-prob; augment.make_splices writes such clips as files)."""

import os

import numpy as np

from mega_kws_tools.audio import SR
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.data.layout import KEYWORDS, UNKNOWN


SPLICE_FRAME = 160       # 10 ms frames for finding a word's extent
SPLICE_FLOOR_DB = -20.0  # a frame is speech within this of the loudest frame
SPLICE_CUT = (0.35, 0.65)  # where the word is cut, as a share of its extent
SPLICE_FADE = 80         # 5 ms cross-fade at the joint
# Words whose half, joined to half of the keyword, could make the keyword again
# ("ye" + the coda of "guess" is "yes", the onset of "leaf" + "ft" is "left"):
# never spliced to it.
_NO_GO = "now nose note nope snow oh two zero follow show grow goal goat gold hello okay home close"
SPLICE_AVOID = {k: set(v.split()) for k, v in {
    "yes": "yeah yep yet guess chess", "no": _NO_GO, "go": _NO_GO, "up": "cup pup app hop",
    "down": "town brown dawn done round", "left": "leaf lift loft let laugh",
    "right": "light bright ride white night rate time five nine", "on": "onto own an in gone don one",
    "off": "of cough awful", "stop": "stock top shop step spot stuff"}.items()}


def speech_extent(clip: np.ndarray):
    """(start, end) samples of the clip's loud part: the first and last 10 ms
    frame within SPLICE_FLOOR_DB of the loudest one; None if it is silent."""
    n = len(clip) // SPLICE_FRAME
    rms = np.sqrt(np.mean(clip[:n * SPLICE_FRAME].reshape(n, SPLICE_FRAME) ** 2, axis=1))
    if n == 0 or rms.max() <= 1e-4:
        return None
    loud = np.nonzero(rms >= rms.max() * 10 ** (SPLICE_FLOOR_DB / 20))[0]
    return int(loud[0]) * SPLICE_FRAME, (int(loud[-1]) + 1) * SPLICE_FRAME


def splice_pair(keyword: np.ndarray, other: np.ndarray, keep_onset: bool, rng: np.random.Generator):
    """A one-second clip that is half a keyword and half another word: the
    keyword's onset followed by the other word's coda (keep_onset), or the other
    word's onset followed by the keyword's coda. Each word is cut at a random
    point of its loud part, the second part is brought to the first's level,
    and the joint is cross-faded. None if either clip is silent. A near miss
    by construction ("ye" + "ed", "ri" + "op"): it sounds like the start or the
    end of a keyword and must not be taken for one (--splice-prob)."""
    ek, eo = speech_extent(keyword), speech_extent(other)
    if ek is None or eo is None:
        return None
    cut_k = ek[0] + int(rng.uniform(*SPLICE_CUT) * (ek[1] - ek[0]))
    cut_o = eo[0] + int(rng.uniform(*SPLICE_CUT) * (eo[1] - eo[0]))
    a, b = (keyword[ek[0]:cut_k], other[cut_o:eo[1]]) if keep_onset else (other[eo[0]:cut_o], keyword[cut_k:ek[1]])
    if len(a) < SPLICE_FADE or len(b) < SPLICE_FADE:
        return None
    b = b * (float(np.sqrt(np.mean(a * a))) / (float(np.sqrt(np.mean(b * b))) + 1e-9))
    ramp = np.linspace(0.0, 1.0, SPLICE_FADE, dtype=np.float32)
    joined = np.concatenate([a[:-SPLICE_FADE], a[-SPLICE_FADE:] * (1 - ramp) + b[:SPLICE_FADE] * ramp,
                             b[SPLICE_FADE:]])[:SR]
    out = np.zeros(SR, np.float32)
    start = (SR - len(joined)) // 2
    out[start:start + len(joined)] = joined
    return out


def splice_pool(ds: Dataset, keyword: str, j: int) -> np.ndarray:
    """Indices of the _unknown_ clips that may be spliced to clip j, a `keyword`
    clip: every word but the keyword's SPLICE_AVOID ones (a clip's word is its
    folder), said by the same voice and variant as clip j if it has any, else by
    the same voice, else of the same source (0: --data, 1: --extra-data), so
    that the joint is a change of word, not of speaker. Cached in ds.splice_cache."""
    cache = ds.splice_cache
    if "ok" not in cache:
        # the background-noise crops (path "") are never _unknown_
        words = np.array([os.path.basename(os.path.dirname(p)) for p in ds.paths])
        cache["ok"] = {k: (ds.y == ds.labels.index(UNKNOWN)) & ~np.isin(words, sorted(SPLICE_AVOID.get(k, ())))
                       for k in KEYWORDS}
    for field in ("voice_variant", "voice", "source"):
        key = (keyword, field, getattr(ds, field)[j])
        if key not in cache:
            if field != "source" and not key[2]:
                cache[key] = np.zeros(0, np.int64)  # voice not known
            else:
                cache[key] = np.nonzero(cache["ok"][keyword] & (getattr(ds, field) == key[2]))[0]
        if len(cache[key]):
            return cache[key]
    return cache[key]

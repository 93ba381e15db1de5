# SPDX-License-Identifier: Apache-2.0
"""Training and evaluation examples: a context second, then the target second,
with the waveform augmentations drawn per example."""

import numpy as np
import torch

from mega_kws_tools.audio import SR
from mega_kws_tools.augment.noise import add_babble, add_noise, noise_pools
from mega_kws_tools.augment.nonspeech import nonspeech_window
from mega_kws_tools.augment.speaker import change_speed, FORMANT_RANGE, formant_track, PITCH_RANGE, recolor, shift_pitch, SPEED_RANGE, TILT_RANGE
from mega_kws_tools.augment.splice import splice_pair, splice_pool
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.data.layout import KEYWORDS, SILENCE, UNKNOWN


def make_batch(ds: Dataset, idx: np.ndarray, rng: np.random.Generator, train: bool, noise_prob: float = 0.0,
               speed_prob: float = 0.0, splice_prob: float = 0.0, color_prob: float = 0.0,
               vowel_prob: float = 0.0, pitch_prob: float = 0.0, babble_prob: float = 0.0,
               speed_range=SPEED_RANGE, nonspeech: float = 0.0, recordings: list = (), nonspeech_weights=None):
    """(B, 2 s) float inputs and labels: context second + target second
    (shifted); in training, with probability splice_prob a keyword's target
    second becomes half of it spliced to half of an _unknown_ word of the same
    voice where there is one (splice_pool), labelled _unknown_ (splice_pair); with
    probability color_prob its formants are moved and its spectrum tilted (recolor); with
    probability vowel_prob its formants are moved by a factor that changes every
    sound (formant_track); with probability pitch_prob its pitch alone is moved
    (shift_pitch); with probability speed_prob the target second is played speed_range (default
    0.88-1.12) times as fast, and
    with probability noise_prob noise is added to it: with probability babble_prob
    babble of several _unknown_ words (add_babble), else one noise clip (add_noise).
    With probability nonspeech an example becomes, whole, a generated non-speech
    sound (nonspeech.nonspeech_window: a tone, beeps, a chirp, noise, notes;
    half of them a slice of recordings where given: nonspeech.load_recordings;
    the kinds drawn with the probabilities nonspeech_weights where given)
    labelled _silence_; needs the _silence_ class."""
    b = len(idx)
    x = np.zeros((b, 2 * SR), dtype=np.float32)
    y = ds.y[idx].copy()
    keyword_ids = set(range(len(KEYWORDS)))
    non_kw = np.nonzero(~np.isin(ds.y, list(keyword_ids)))[0]
    pools = noise_pools(ds) if train and noise_prob > 0 else []
    babble_ids = np.nonzero(ds.y == ds.labels.index(UNKNOWN))[0] if train and babble_prob > 0 else []
    splice = train and splice_prob > 0 and UNKNOWN in ds.labels
    if train and nonspeech > 0 and SILENCE not in ds.labels:
        raise ValueError(f"non-speech negatives need the {SILENCE} class (labels {ds.labels})")
    for i, j in enumerate(idx):
        if train and nonspeech > 0 and rng.random() < nonspeech:
            x[i], y[i] = nonspeech_window(rng, recordings, nonspeech_weights), ds.labels.index(SILENCE)
            continue
        target = ds.audio[j].astype(np.float32) / 32768.0
        if splice and ds.y[j] in keyword_ids and rng.random() < splice_prob:
            pool = splice_pool(ds, KEYWORDS[ds.y[j]], j)
            if len(pool):
                other = ds.audio[pool[rng.integers(len(pool))]].astype(np.float32) / 32768.0
                spliced = splice_pair(target, other, bool(rng.random() < 0.5), rng)
                if spliced is not None:
                    target, y[i] = spliced, ds.labels.index(UNKNOWN)
        if train and color_prob > 0 and rng.random() < color_prob:
            target = recolor(target, float(rng.uniform(*FORMANT_RANGE)), float(rng.uniform(*TILT_RANGE)))
        if train and vowel_prob > 0 and rng.random() < vowel_prob:
            target = recolor(target, formant_track(len(target), rng), 0.0)
        if train and pitch_prob > 0 and rng.random() < pitch_prob:
            target = shift_pitch(target, float(np.exp(rng.uniform(*np.log(PITCH_RANGE)))))
        if train and speed_prob > 0 and rng.random() < speed_prob:
            target = change_speed(target, float(rng.uniform(*speed_range)))
        shift = int(rng.integers(-1600, 1601)) if train else 0
        if shift > 0:
            target = np.concatenate([np.zeros(shift, np.float32), target[:-shift]])
        elif shift < 0:
            target = np.concatenate([target[-shift:], np.zeros(-shift, np.float32)])
        if train:
            target *= float(10 ** (rng.uniform(-6, 6) / 20))
            if noise_prob > 0 and rng.random() < noise_prob:
                if babble_prob > 0 and rng.random() < babble_prob and len(babble_ids):
                    add_babble(target, ds, babble_ids, rng)
                else:
                    add_noise(target, ds, pools, rng)
        ctx_kind = rng.random()
        if ctx_kind < 0.3 or len(non_kw) == 0:
            ctx = np.zeros(SR, np.float32)
        else:
            ctx = ds.audio[non_kw[rng.integers(len(non_kw))]].astype(np.float32) / 32768.0
            ctx *= float(10 ** (rng.uniform(-12, 0) / 20))
        x[i, :SR] = ctx
        x[i, SR:] = target
    np.clip(x, -1.0, 1.0, out=x)
    return torch.from_numpy(x), torch.from_numpy(y)

# SPDX-License-Identifier: Apache-2.0
"""Noise and babble mixed into training examples (--noise-prob, --babble-prob)."""

import numpy as np

from mega_kws_tools.audio import SR
from mega_kws_tools.data.dataset import Dataset


def noise_pools(ds: Dataset):
    """The clips add_noise draws from, with their SNR ranges in dB: _silence_
    (noise, hum) at 0-20 dB, _unknown_ words (babble) at 5-20 dB."""
    pools = []
    for name, snr in (("_silence_", (0.0, 20.0)), ("_unknown_", (5.0, 20.0))):
        if name in ds.labels:
            ids = np.nonzero(ds.y == ds.labels.index(name))[0]
            if len(ids):
                pools.append((ids, snr))
    return pools


def add_noise(target: np.ndarray, ds: Dataset, pools, rng: np.random.Generator):
    """Mixes a random clip of one of the pools (noise_pools) into target, in
    place, at a random SNR of the pool's range, rolled by a random offset. A
    fresh draw each time a clip is used, so the model never sees the same noisy
    version twice (the generated sets have one per clip)."""
    if not pools:
        return
    ids, (lo, hi) = pools[int(rng.integers(len(pools)))]
    noise = np.roll(ds.audio[ids[rng.integers(len(ids))]].astype(np.float32) / 32768.0, int(rng.integers(SR)))
    mix_at_snr(target, noise, (lo, hi), rng)


def mix_at_snr(target: np.ndarray, noise: np.ndarray, snr_db, rng: np.random.Generator):
    """Adds noise to target, in place, at an SNR (RMS over the whole clip) drawn
    uniformly from the range snr_db; noise that is digital silence adds nothing."""
    t_rms = float(np.sqrt(np.mean(target * target)))
    n_rms = float(np.sqrt(np.mean(noise * noise))) + 1e-9
    target += noise * (t_rms / n_rms * float(10 ** (-rng.uniform(*snr_db) / 20)))


BABBLE_WORDS = (3, 7)          # --babble-prob: unrelated words summed into one babble ...
BABBLE_SNR_DB = (-3.0, 12.0)   # ... mixed in at this SNR over the whole second (about 0-15 dB over the word)


def add_babble(target: np.ndarray, ds: Dataset, ids: np.ndarray, rng: np.random.Generator):
    """Mixes babble into target, in place: the sum of 3-7 random clips of `ids`
    (_unknown_ words), each rolled by its own offset and scaled by 0 to -6 dB, at a
    random SNR of BABBLE_SNR_DB. The generated sets' babble is 4-8 words at 0-30 dB
    over the word; add_noise's babble is one word at 5-20 dB."""
    noise = np.zeros(len(target), np.float32)
    for _ in range(int(rng.integers(BABBLE_WORDS[0], BABBLE_WORDS[1] + 1))):
        clip = ds.audio[ids[rng.integers(len(ids))]].astype(np.float32) / 32768.0
        noise += np.roll(clip, int(rng.integers(len(clip)))) * np.float32(10 ** (-rng.uniform(0.0, 6.0) / 20))
    mix_at_snr(target, noise, BABBLE_SNR_DB, rng)

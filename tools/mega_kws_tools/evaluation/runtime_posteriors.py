# SPDX-License-Identifier: Apache-2.0
"""Posteriors of a .mega file from the runtime itself (python/mega_kws over
libmega_kws; MEGA_KWS_LIBRARY names the library, else the package looks where
it is installed): what tune_detection sweeps with --model, for a model whose
checkpoint is not a MegaKWS (a student on the teacher's embedding), and to
tune exactly the file that ships."""

import os
import sys
from types import SimpleNamespace

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BLOCK = 16000  # samples per push: one second


def _mega_kws():
    try:
        import mega_kws
    except ImportError:
        sys.path.insert(0, os.path.join(ROOT, "python"))  # the repository's package
        import mega_kws
    return mega_kws


class RuntimeModel:
    """A model file and the stream figures tune_detection reads: cfg.chunk_samples (one hop),
    cfg.window_chunks (the detector's warm-up), cfg.sample_rate, labels."""

    def __init__(self, path: str):
        self._api = _mega_kws()
        self.model = self._api.Model(path)
        m = self.model
        self.labels = list(m.labels)
        self.cfg = SimpleNamespace(chunk_samples=m.chunk_samples, window_chunks=m.window_samples // m.chunk_samples,
                                   sample_rate=m.sample_rate)

    def stored_detection(self):
        """(the file's stored thresholds, one per label; its stored smoothing in hops)."""
        with self._api.Detector(self.model) as stored:
            return list(stored.thresholds), int(stored.smoothing)

    def stream_posteriors(self, samples: np.ndarray) -> np.ndarray:
        """Float samples [n] -> [n // chunk_samples, n_classes] float64: the softmax of the logits a fresh
        stream reports after each whole chunk."""
        session = self._api.Session(self.model)
        x = np.ascontiguousarray(samples, np.float32)
        parts = [session.push(x[i:i + BLOCK]) for i in range(0, len(x), BLOCK)]
        logits = np.concatenate(parts).astype(np.float64) if parts else np.zeros((0, len(self.labels)))
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

# SPDX-License-Identifier: Apache-2.0
"""How often each training clip is drawn (--unknown-share, --extra-share,
--class-boost)."""

from typing import Optional

import numpy as np

from mega_kws_tools.data.dataset import Dataset


def sampling_probabilities(ds: Dataset, unknown_share: float = 0.0, extra_share: Optional[float] = None,
                           boost: Optional[dict] = None) -> np.ndarray:
    """Per-clip probabilities of being drawn: every class equally likely
    (class-balanced), or, with unknown_share > 0, _unknown_ drawn that share of
    the time and the other classes equally likely in the rest.

    Within a class, clips are equally likely, so a class with few extra
    (real) clips is almost always heard in a synthetic voice. extra_share, if
    given, draws the extra clips of every class that has both kinds that share of
    the class's time, so that the kind of voice says nothing about the class.

    boost, if given, maps class names to factors: such a class is drawn that
    many times as often as it otherwise would be, taken from the others in proportion."""
    counts = np.bincount(ds.y, minlength=len(ds.labels)).astype(np.float64)
    present = counts > 0
    share = present / present.sum()
    if unknown_share > 0 and "_unknown_" in ds.labels and present[ds.labels.index("_unknown_")]:
        u = ds.labels.index("_unknown_")
        rest = present.copy()
        rest[u] = False
        share = np.where(rest, (1.0 - unknown_share) / max(1, rest.sum()), 0.0)
        share[u] = unknown_share
    if boost:
        share = share * np.array([boost.get(name, 1.0) for name in ds.labels])
        share = share / share.sum()
    p = (share / np.maximum(counts, 1))[ds.y]
    if extra_share is not None:
        n = len(ds.labels)
        extra = np.bincount(ds.y[ds.source == 1], minlength=n).astype(np.float64)
        base = counts - extra
        both = (extra > 0) & (base > 0)
        for s, kind_count, frac in ((1, extra, extra_share), (0, base, 1.0 - extra_share)):
            sel = (ds.source == s) & both[ds.y]
            p[sel] = (share * frac / np.maximum(kind_count, 1))[ds.y[sel]]
    return p / p.sum()

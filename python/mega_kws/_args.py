# SPDX-License-Identifier: Apache-2.0
"""Checks of the package's arguments that the C API cannot make: a wrong type
is a TypeError naming the parameter (not a value converted silently, nor a
misleading message later), and thresholds given by label become the model's
stored thresholds with those labels' replaced."""

import numbers

import numpy as np

INT32_MAX = 2 ** 31 - 1
# The detector's ranges, as runtime/include/mega/detection_limits.hpp defines them (the library checks
# them too; here they give the message a Python user expects). tests/test_detection_limits.py
# checks that these agree with the header.
SMOOTHING_HOPS_RANGE = (1, 1024)
REFRACTORY_MS_RANGE = (0, 600000)


def integer(name, value, unit=""):
    """value as an int: an integral number (NumPy's too), not a bool, a float or
    a string."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer{unit}, not {type(value).__name__} {value!r}")
    return int(value)


def int32(name, value, invalid):
    """integer(), for an int32_t of the C API: beyond its range a value would
    wrap around (2**32 + 1 threads would be 1), so it is refused here."""
    value = integer(name, value)
    if not -INT32_MAX <= value <= INT32_MAX:
        raise invalid(f"{name} = {value} is out of range")
    return value


def split_thresholds(threshold, thresholds, invalid):
    """(threshold, thresholds) as Detector takes them: threshold a number for
    every label or a {label: threshold} dict; thresholds one per label in label
    order or such a dict. Returns (one number or None, a list, a dict or None)."""
    if isinstance(threshold, dict):
        if thresholds is not None:
            raise invalid("give thresholds per label or one threshold, not both")
        return None, threshold
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, numbers.Real)):
        raise TypeError(f"threshold must be a number or a {{label: threshold}} dict, not "
                        f"{type(threshold).__name__} (one per label in label order: thresholds=[...])")
    return threshold, thresholds


def by_label(labels, stored, chosen, invalid):
    """stored (one per label) with the labels in chosen ({label: threshold},
    each in (0, 1]) replaced, as keyword_spotter --threshold go=0.8 does."""
    out = np.array(stored, np.float32)
    for label, t in chosen.items():
        if label not in labels:
            raise invalid(f"threshold: the model has no label {label!r} (its labels: {','.join(labels)})")
        v = float(t) if isinstance(t, numbers.Real) and not isinstance(t, bool) else float("nan")
        if not 0.0 < v <= 1.0:  # False for NaN
            raise invalid(f"threshold of {label!r} must be a number in (0, 1], got {t!r}")
        out[labels.index(label)] = v
    return out

"""flatc's Python code for formats/mega_model.fbs (package mega.fb, regenerated
with `flatc --python -o tools/convert/generated formats/mega_model.fbs`).

flatc's code imports itself by absolute name (`from mega.fb.HParams import
HParams`), so its folder has to be on sys.path as a top-level package `mega`;
this is the one place that puts it there. Import the tables from here:
`from tools.convert.generated import Model`.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from mega.fb import (Activation, AttentionFn, Detection, DType, EmaDirection, HParams,  # noqa: E402,F401
                     Model, NormType, PatchFeatures, PatchNorm, Pooling, Provenance, SelfTest, Tensor)

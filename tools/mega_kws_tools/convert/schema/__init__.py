"""flatc's Python code for formats/mega_model.fbs (namespace mega.fb), as a
subpackage: flatc writes it as a top-level package `mega.fb` whose tables
import each other by that absolute name; `python3 -m
mega_kws_tools.convert.gen_schema` regenerates these files and makes those
imports relative, so nothing has to put a folder on sys.path.

Import the tables from here: `from mega_kws_tools.convert.schema import Model`.
"""
from . import (Activation, AttentionFn, Detection, DType, EmaDirection, HParams,  # noqa: F401
               Model, NormType, PatchFeatures, PatchNorm, Pooling, Provenance, SelfTest, Tensor)

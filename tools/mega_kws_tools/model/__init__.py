# SPDX-License-Identifier: Apache-2.0
"""PyTorch reference of the Mega-chunk keyword spotter (our own code).

Module and parameter names follow the official fairseq Speech Commands model
(`encoder.encoder.` prefix stripped), so official state dicts load by name.
The math is written out in `docs/../shared/docs/mega-spec.md`; this package is the
executable form the converter, the golden fixtures and training rely on.

Works in any float dtype: float32 for training, float64 for golden data.

The package: config (MegaConfig), frontend (the patch embedding), layers (the
encoder's), kws (MegaKWS), checkpoint (loading official and our checkpoints).
Every name is here too: `from mega_kws_tools import model as mt; mt.MegaKWS(...)`.
"""

from mega_kws_tools.model.config import (ATTENTION_FNS, NORM_TYPES, PATCH_FEATURES, PATCH_NORMS, ACTIVATIONS,
                                         LAPLACE_MU, LAPLACE_SIGMA, MegaConfig)
from mega_kws_tools.model.frontend import (PatchEmbedding, running_mean, quadrature_filterbank, mel_bins,
                                           mel_matrix, quadrature_rows)
from mega_kws_tools.model.layers import (activation_fn, laplace, ScaleNorm, RMSNorm, SeqNorm, MultiHeadEMA,
                                         RelPosBias, MegaLayer, NormalizedFFN, EncoderLayer)
from mega_kws_tools.model.kws import MegaKWS
from mega_kws_tools.model.checkpoint import (config_from_fairseq_args, FAIRSEQ_PREFIX, IGNORED_SUFFIXES,
                                             strip_fairseq_names, load_weights, model_from_config_checkpoint,
                                             load_checkpoint, randomize_for_testing)

__all__ = ["ATTENTION_FNS", "NORM_TYPES", "PATCH_FEATURES", "PATCH_NORMS", "ACTIVATIONS", "LAPLACE_MU",
           "LAPLACE_SIGMA", "MegaConfig", "PatchEmbedding", "running_mean", "quadrature_filterbank",
           "mel_bins", "mel_matrix", "quadrature_rows", "activation_fn", "laplace", "ScaleNorm", "RMSNorm",
           "SeqNorm", "MultiHeadEMA", "RelPosBias", "MegaLayer", "NormalizedFFN", "EncoderLayer", "MegaKWS",
           "config_from_fairseq_args", "FAIRSEQ_PREFIX", "IGNORED_SUFFIXES", "strip_fairseq_names",
           "load_weights", "model_from_config_checkpoint", "load_checkpoint", "randomize_for_testing"]

# SPDX-License-Identifier: Apache-2.0
"""Checkpoints: official fairseq ones and ours, to a model; random weights for tests."""

import dataclasses
import math

import torch

from mega_kws_tools.model.config import MegaConfig
from mega_kws_tools.model.kws import MegaKWS


def config_from_fairseq_args(args, state_dict) -> MegaConfig:
    """MegaConfig from an official checkpoint's argparse Namespace (+ shapes)."""
    def arg(name, default=None):
        return getattr(args, name, default)

    sen_rep = arg("sen_rep_type", "mp")
    if sen_rep != "mp":
        raise ValueError(f"option sen_rep_type = {sen_rep!r} is not supported (only 'mp', mean pooling)")
    rel = arg("rel_pos_bias", "simple")
    if rel != "simple":
        raise ValueError(f"option rel_pos_bias = {rel!r} is not supported (only 'simple')")
    layer_type = arg("layer_type", "mega")
    if layer_type != "mega":
        raise ValueError(f"option layer_type = {layer_type!r} is not supported (only 'mega')")
    chunk = int(arg("chunk_size", 1000))
    if chunk <= 0:
        raise ValueError(f"option chunk_size = {chunk} is not supported (unchunked attention cannot stream)")
    norm = arg("norm_type", "batchnorm")
    if norm == "syncbatchnorm":
        norm = "batchnorm"  # identical in eval
    trunc = arg("truncation_length", None)
    delta = state_dict.get("encoder.encoder.layers.0.mega_layer.move.delta")
    d = int(arg("encoder_embed_dim", 60))
    if delta is None:
        raise ValueError("missing tensor encoder.encoder.layers.0.mega_layer.move.delta")
    if delta.shape[0] not in (d, 2 * d):
        raise ValueError(f"tensor encoder.encoder.layers.0.mega_layer.move.delta has shape {tuple(delta.shape)}, "
                         f"expected first dim {d} (uni) or {2 * d} (bi)")
    h = int(arg("encoder_hidden_dim", 120))
    max_pos = int(arg("max_positions", 16000))
    cfg = MegaConfig(
        embed_dim=d, hidden_dim=h,
        ffn_hidden_dim=int(arg("encoder_ffn_embed_dim", h) or 0),
        z_dim=int(arg("z_dim", 30)), n_dim=int(arg("n_dim", 16)),
        n_layers=int(arg("encoder_layers", 6)), chunk_size=chunk,
        truncation=int(trunc) if trunc else 0,
        bidirectional=delta.shape[0] == 2 * d,
        attention_fn=arg("attention_activation_fn", "laplace"), norm_type=norm,
        prenorm=bool(arg("encoder_normalize_before", True)),
        activation=arg("activation_fn", "silu"),
        classifier_layers=int(arg("classifier_layers", 1)),
        classifier_dim=int(arg("classifier_out_dim", 2 * d)),
        classifier_activation=arg("classifier_activation_fn", "gelu"),
        n_classes=int(arg("sentence_class_num", 10)),
        window_chunks=max(1, max_pos // chunk))
    cfg.check()
    return cfg


FAIRSEQ_PREFIX = "encoder.encoder."
IGNORED_SUFFIXES = ("num_batches_tracked", "_float_tensor")


def strip_fairseq_names(state_dict) -> dict:
    """Official state-dict names -> ours (drop the encoder prefix and bookkeeping buffers)."""
    out = {}
    for name, value in state_dict.items():
        if name.endswith(IGNORED_SUFFIXES):
            continue
        if name.startswith(FAIRSEQ_PREFIX):
            name = name[len(FAIRSEQ_PREFIX):]
        out[name] = value
    return out


def load_weights(model: MegaKWS, weights: dict) -> None:
    """Strict load with messages naming the tensor; reshapes the official (D,) embedding."""
    expected = {k: v for k, v in model.state_dict().items() if not k.endswith(IGNORED_SUFFIXES)}
    given = dict(weights)
    emb = given.get("embed_tokens.weight")
    if emb is not None and emb.dim() == 1:
        given["embed_tokens.weight"] = emb.view(-1, 1)
    elif emb is not None and emb.dim() == 3:  # Conv1d (D, 1, k)
        given["embed_tokens.weight"] = emb.reshape(emb.shape[0], emb.shape[2])
    for name, ref in expected.items():
        if name not in given:
            raise ValueError(f"missing tensor {name}")
        if tuple(given[name].shape) != tuple(ref.shape):
            raise ValueError(f"tensor {name} has shape {tuple(given[name].shape)}, expected {tuple(ref.shape)}")
    extra = sorted(set(given) - set(expected))
    if extra:
        raise ValueError(f"unexpected tensor {extra[0]} (not part of this configuration)")
    model.load_state_dict({k: given[k] for k in expected}, strict=False)


def model_from_config_checkpoint(ckpt: dict) -> MegaKWS:
    """The model of one of our checkpoint dicts ({'config', 'model', ...}), in training
    mode; ValueError for an unsupported option or a tensor that does not fit."""
    known = {f.name for f in dataclasses.fields(MegaConfig)}
    unknown = sorted(set(ckpt["config"]) - known)
    if unknown:
        raise ValueError(f"option {unknown[0]} in the checkpoint config is not supported")
    cfg = MegaConfig(**ckpt["config"])
    cfg.check()
    model = MegaKWS(cfg)
    load_weights(model, strip_fairseq_names(ckpt["model"]))
    return model


def load_checkpoint(path: str):
    """Returns (model in eval mode, float32, with weights; source format; extra dict)."""
    try:
        ckpt = torch.load(path, map_location="cpu")
    except Exception as e:  # pickle, zip and torch errors alike: the file is not a usable checkpoint
        raise ValueError(f"{path}: cannot read the checkpoint ({type(e).__name__}: {e})") from None
    if isinstance(ckpt, dict) and "mega_config" in ckpt and "state" in ckpt:  # teacher.student's best.pt
        raise ValueError(f"{path}: a student on the teacher's embedding: convert it with "
                         "python3 -m mega_kws_tools.teacher.student_convert")
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise ValueError(f"{path}: not a checkpoint (expected a dict with a 'model' state dict)")
    # ours first: training checkpoints also keep their command-line args
    if "config" in ckpt:
        model = model_from_config_checkpoint(ckpt)
        fmt, extra = "mega-kws", ckpt
    elif "args" in ckpt and ckpt["args"] is not None:
        cfg = config_from_fairseq_args(ckpt["args"], ckpt["model"])
        model = MegaKWS(cfg)
        load_weights(model, strip_fairseq_names(ckpt["model"]))
        fmt, extra = "fairseq", {}
    else:
        raise ValueError(f"{path}: unknown checkpoint format (neither fairseq 'args' nor mega-kws 'config')")
    model.eval()
    return model, fmt, extra


def randomize_for_testing(model: MegaKWS, seed: int) -> None:
    """Random weights where every parameter visibly matters (for parity fixtures).

    Unlike the training init: BatchNorm statistics are non-trivial, some EMA
    channels decay slowly enough that the truncation changes the output, and the
    attention scores land where laplace is neither 0 nor 1.
    """
    cfg = model.cfg
    g = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=g) * std + mean

    def uniform(shape, lo, hi):
        return torch.rand(shape, generator=g) * (hi - lo) + lo

    with torch.no_grad():
        for name, p in model.state_dict().items():
            leaf = name.rsplit(".", 1)[-1]
            shape = p.shape
            if name.endswith("num_batches_tracked"):
                continue
            if ".norm." in name or name.startswith("final_norm"):
                new = {"weight": lambda: uniform(shape, 0.5, 1.5), "scalar": lambda: uniform(shape, 0.5, 1.5),
                       "bias": lambda: normal(shape, 0.1), "running_mean": lambda: normal(shape, 0.3),
                       "running_var": lambda: uniform(shape, 0.5, 2.0)}[leaf]()
            elif ".move." in name:
                new = {"delta": lambda: uniform(shape, -3.0, 1.0), "alpha": lambda: uniform(shape, -7.0, 1.0),
                       "beta": lambda: torch.tensor([1.0 if n % 2 == 0 else -1.0 for n in range(shape[1])]
                                                    ).view(1, shape[1], 1) + normal(shape, 0.1),
                       "gamma": lambda: normal(shape, 1.0),
                       "omega": lambda: normal(shape, 1.0)}[leaf]()
            elif name.endswith("mega_layer.gamma") or name.endswith("mega_layer.beta"):
                # q.k / C must vary around the laplace centre, not sit at a constant offset
                std = 0.5 if cfg.attention_fn == "softmax" else 0.3 * math.sqrt(cfg.chunk_size)
                new = normal(shape, std if name.endswith("gamma") else 0.1 * std)
            elif name.endswith("rel_pos_bias"):
                new = uniform(shape, 0.2, 1.2) if cfg.attention_fn == "laplace" else normal(shape, 0.5)
            elif name.endswith("h_proj.weight") and cfg.attention_fn != "softmax":
                # unnormalized attention sums ~C weighted values: keep h in range
                new = normal(shape, 4.0 / (math.sqrt(shape[1]) * cfg.chunk_size))
            elif name in ("embed_tokens.weight", "embed_tokens.bands") and cfg.patch_features == "logmel":
                continue  # the fixed spectrum and bands, as every log-mel model has them
            elif name == "embed_tokens.mix":
                new = normal(shape, 0.3 / math.sqrt(shape[1]))
            elif name == "embed_tokens.scale":
                new = uniform(shape, 0.1, 0.5)
            elif name == "embed_tokens.norm_init":  # about where the log power of a test input sits
                new = normal(shape, 1.0, mean=-2.0)
            elif name == "sentence_projection_layer.weight":
                new = normal(shape, 0.2 / math.sqrt(shape[1]))  # logits of order 10, as trained models have
            elif leaf == "weight" and p.dim() == 2:
                new = normal(shape, 1.0 / math.sqrt(shape[1]))
            elif leaf == "bias":
                new = normal(shape, 0.1)
            else:
                raise AssertionError(f"randomize_for_testing: no rule for {name}")
            p.copy_(new)
        for layer in model.layers:
            # scale each EMA component to unit DC gain: slow channels would otherwise blow up
            ema = layer.mega_layer.move
            gain = torch.sigmoid(ema.delta)[..., 0]
            decay = 1.0 - gain * torch.sigmoid(ema.alpha)[..., 0]
            ema.gamma.mul_((1.0 - decay) / gain * math.sqrt(ema.ndim) * (0.5 if cfg.bidirectional else 1.0))

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Turn a .mega model file back into a mega-kws training checkpoint.

  mega_unpack.py MODEL.mega -o CKPT.pt

The checkpoint holds the configuration, the weights, the labels and the
file's detection defaults, in the layout train.py writes, so that
`train.py --init CKPT.pt` fine-tunes a shipped model and the tools that read
checkpoints (tune_detection.py, mega_convert.py) accept it. Nothing is
guessed: the file's trailer (length, CRC-32) is checked, every hyper-parameter
and tensor must map onto the PyTorch reference exactly, and the rebuilt model
must reproduce the file's self-test logits within its stored tolerance
before anything is written. float16 files unpack to float32.
"""

import argparse
import dataclasses
import os
import sys


import numpy as np
import torch

from mega_kws_tools.convert import mega_convert as mc
from mega_kws_tools import model as mega_torch
from mega_kws_tools.convert import mega_format
from mega_kws_tools.convert.schema import DType, EmaDirection, Model, PatchFeatures


class UnpackError(Exception):
    pass


def _inverse(table: dict, value: int, what: str) -> str:
    for name, code in table.items():
        if code == value:
            return name
    raise UnpackError(f"{what} = {value} is not known to this tool")


def read_flatbuffer(data: bytes) -> bytes:
    """The FlatBuffer inside a .mega file, after checking the trailer."""
    try:
        return mega_format.strip_trailer(data)
    except mega_format.FormatError as e:
        raise UnpackError(str(e)) from None


def open_model(data: bytes):
    """The file's root table, its trailer and schema version checked."""
    m = Model.Model.GetRootAs(read_flatbuffer(data), 0)
    if m.SchemaVersion() > mega_format.SCHEMA_VERSION:
        raise UnpackError(f"schema version {m.SchemaVersion()} is newer than this tool ({mega_format.SCHEMA_VERSION})")
    return m


def config_of(m, **override):
    """The file's hyper-parameters as a MegaConfig (override: fields replaced before the check)."""
    hp = m.Hparams()
    cfg = mega_torch.MegaConfig(
        embed_dim=hp.EmbedDim(), hidden_dim=hp.HiddenDim(), ffn_hidden_dim=hp.FfnHiddenDim(),
        z_dim=hp.ZDim(), n_dim=hp.NDim(), n_layers=hp.NLayers(), chunk_size=hp.ChunkSize(),
        truncation=hp.Truncation(), bidirectional=hp.EmaDirection() == EmaDirection.EmaDirection.Bidirectional,
        attention_fn=_inverse(mc._ATTN, hp.AttentionFn(), "attention_fn"),
        norm_type=_inverse(mc._NORM, hp.NormType(), "norm_type"), norm_eps=hp.NormEps(),
        prenorm=bool(hp.Prenorm()), activation=_inverse(mc._ACT, hp.Activation(), "activation"),
        classifier_layers=hp.ClassifierLayers(), classifier_dim=hp.ClassifierDim(),
        classifier_activation=_inverse(mc._ACT, hp.ClassifierActivation(), "classifier_activation"),
        n_classes=hp.NClasses(), patch_kernel=hp.PatchKernel(), patch_stride=hp.PatchStride(),
        patch_features=_inverse(mc._PATCH, hp.PatchFeatures(), "patch_features"),
        patch_log_eps=hp.PatchLogEps(), patch_norm=_inverse(mc._PATCH_NORM, hp.PatchNorm(), "patch_norm"),
        patch_norm_decay=hp.PatchNormDecay(), window_chunks=hp.WindowChunks(), sample_rate=m.SampleRate(),
        **({"patch_bands": hp.PatchBands()} if hp.PatchFeatures() == PatchFeatures.PatchFeatures.LogMel else {}))
    cfg = dataclasses.replace(cfg, **override)
    try:
        cfg.check()
    except ValueError as e:
        raise UnpackError(str(e)) from None
    return cfg


def tensors_of(m) -> dict:
    """{name: float32 array} of the file's tensors."""
    given = {}
    for i in range(m.TensorsLength()):
        t = m.Tensors(i)
        dtype = {DType.DType.F32: "<f4", DType.DType.F16: "<f2"}.get(t.Dtype())
        if dtype is None:
            raise UnpackError(f"tensor {t.Name().decode()} has dtype {t.Dtype()}, not float32 or float16")
        shape = tuple(int(s) for s in t.ShapeAsNumpy())
        values = np.frombuffer(t.DataAsNumpy().tobytes(), dtype=dtype).astype(np.float32)
        if values.size != int(np.prod(shape)):
            raise UnpackError(f"tensor {t.Name().decode()}: {values.size} values for shape {shape}")
        given[t.Name().decode()] = values.reshape(shape)
    return given


def load_tensors(model, given: dict, skip=()):
    """Every tensor of model's state (but those under a prefix in skip) from given, by name; no tensor
    of given may be left over."""
    state = {}
    for name, ref in model.state_dict().items():
        if name.endswith(mega_torch.IGNORED_SUFFIXES) or name.startswith(tuple(skip)):
            state[name] = ref
            continue
        if name not in given:
            raise UnpackError(f"missing tensor {name}")
        a = given.pop(name)
        if a.size != ref.numel():  # the file drops trailing unit axes, e.g. EMA (E, N, 1) -> (E, N)
            raise UnpackError(f"tensor {name} has shape {a.shape}, the model expects {tuple(ref.shape)}")
        state[name] = torch.from_numpy(a.copy()).reshape(ref.shape).to(ref.dtype)
    if given:
        raise UnpackError(f"unexpected tensor {sorted(given)[0]}")
    model.load_state_dict(state)


def unpack(data: bytes):
    """(model in eval mode, labels, detection dict, notes) from .mega bytes."""
    m = open_model(data)
    if m.InputScaling():
        raise UnpackError("the file normalizes its input (official pipeline); training checkpoints do not")
    model = mega_torch.MegaKWS(config_of(m))
    load_tensors(model, tensors_of(m))
    model.eval()
    st = m.SelfTest()
    logits = mc.reference_logits(model, st.InputAsNumpy().astype(np.float32))
    err = float(np.max(np.abs(logits - st.ExpectedLogitsAsNumpy())))
    if not err <= st.Tolerance():
        raise UnpackError(f"the rebuilt model misses the file's self-test by {err:.3g} (tolerance {st.Tolerance():.3g})")
    labels = [m.Labels(i).decode() for i in range(m.LabelsLength())]
    det = m.Detection()
    detection = {"thresholds": [float(v) for v in det.ThresholdsAsNumpy()] if det.ThresholdsLength() else [],
                 "smoothing_hops": det.SmoothingHops(), "refractory_ms": det.RefractoryMs()}
    notes = (m.Provenance().Notes() or b"").decode()
    return model, labels, detection, notes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help=".mega file")
    ap.add_argument("-o", "--output", required=True, help="output checkpoint (.pt)")
    args = ap.parse_args(argv)
    try:
        with open(args.model, "rb") as f:
            data = f.read()
        model, labels, detection, notes = unpack(data)
    except (OSError, UnpackError) as e:
        print(f"mega_unpack.py: {args.model}: {e}", file=sys.stderr)
        return 1
    ckpt = {"config": dataclasses.asdict(model.cfg), "model": model.state_dict(), "labels": labels,
            "step": None, "best_val": None, "detection": detection, "source": os.path.basename(args.model),
            "notes": notes}
    tmp = args.output + ".tmp"
    torch.save(ckpt, tmp)
    os.replace(tmp, args.output)
    n = sum(p.numel() for p in model.parameters())
    print(f"{args.model} -> {args.output}: {n} parameters, {len(labels)} labels, self-test reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())

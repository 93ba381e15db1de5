#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The float16 peaks the converter stores (schema 5, Model.fp16_range;
tools/mega_kws_tools/convert/fp16_peaks.py): written by default, left out on
request as older converters did, and measured on the activations the CUDA
backend stores in float16. The CUDA tests (tests/kernels/cuda/test_cuda_fp16_peaks.cpp)
check them against the runtime's own measurement and that engine creation
reads them. Runs with /usr/bin/python3 -m pytest tests/test_fp16_peaks.py."""

import os

import numpy as np
import pytest

from mega_kws_tools import model as mt
from mega_kws_tools.convert import fp16_peaks, mega_convert
from mega_kws_tools.convert.schema import Model

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "data")
LABELS4 = ["class0", "class1", "class2", "class3"]
# the runtime's names (kernels/cuda/fp16_range.cpp, RangeProbe)
RESIDUAL = {"patch embedding", "norm output", "v projection", "FFN hidden layer", "residual stream x",
            "residual stream x (after the FFN)"}
OTHER = {"EMA output", "v", "gate projection (u, z, r, hx)", "gate (u, z, r, hx)", "q", "k",
         "attention scores (q k^T scaled)", "attention weights"}


def load(name):
    model, _, _ = mt.load_checkpoint(os.path.join(FIX, name + ".pt"))
    model.eval()
    return model


def stored(data):
    """The file's Fp16Range as {"residual": (value, tensor, layer), ...}, or None."""
    r = Model.Model.GetRootAs(data, 0).Fp16Range()
    if r is None:
        return None
    return {kind: (p.Value(), p.Tensor().decode(), p.Layer()) for kind, p in (("residual", r.Residual()),
                                                                               ("other", r.Other()))}


@pytest.mark.parametrize("name", ["tiny_uni", "tiny_softmax_ln_post", "tiny_relu2_scale_noffn", "tiny_logmel"])
def test_the_converter_stores_the_peaks_it_measures(name):
    model = load(name)
    data, _ = mega_convert.build_model_file(model, LABELS4)
    got = stored(data)
    assert got is not None
    want = fp16_peaks.measure(model, mega_convert.self_test_input(model.cfg))
    assert got == {k: (np.float32(v[0]), v[1], v[2]) for k, v in want.items()}
    assert got["residual"][1] in RESIDUAL and got["other"][1] in OTHER
    for value, _, layer in got.values():
        assert 0 < value < 1e3 and -1 <= layer < model.cfg.n_layers


def test_left_out_on_request_as_before_schema_5():
    data, _ = mega_convert.build_model_file(load("tiny_uni"), LABELS4, fp16_range=False)
    assert stored(data) is None
    with open(os.path.join(FIX, "good_no_fp16_range.mega"), "rb") as f:
        assert stored(f.read()) is None


def test_the_peaks_follow_the_weights():
    """Embedding weights 1e4 times larger: the residual stream goes beyond
    float16 even scaled (65504 / 2 * 1024), which the runtime then refuses
    from the file alone; measuring leaves no hook behind."""
    model = load("tiny_patch")
    clip = mega_convert.self_test_input(model.cfg)
    before = fp16_peaks.measure(model, clip)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    for p in model.embed_tokens.parameters():
        p.data.mul_(1e4)
    value, tensor, layer = fp16_peaks.measure(model, clip)["residual"]
    assert value > 65504 / 2 * 1024 > 1e4 * before["residual"][0]
    assert tensor in RESIDUAL and -1 <= layer < model.cfg.n_layers

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Converter tests: reproduces the committed model, refuses what it cannot
represent with a message naming it, and never leaves a half-written file."""

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from mega_kws_tools import model as mega_torch
from mega_kws_tools.convert import mega_convert, mega_format, mega_unpack
from mega_kws_tools.convert.schema import Model

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "data")
CONVERT = mega_convert.__name__  # run with python3 -m
UNPACK = mega_unpack.__name__

LABELS4 = "class0,class1,class2,class3"


def run(*args):
    """python3 -m mega_kws_tools.convert.mega_convert ARGS, in this process (the
    interpreter and PyTorch start once for the file, not once a call: 2-3 s
    each); its exit code, stdout and stderr. The entry points' own test below
    runs the command as a program."""
    out, err = io.StringIO(), io.StringIO()
    argv0 = sys.argv[0]
    sys.argv[0] = mega_convert.__file__  # argparse's program name, as under -m
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = mega_convert.main(list(args))
            except SystemExit as e:  # argparse's usage errors and --help
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv[0] = argv0
    return subprocess.CompletedProcess([CONVERT, *args], code, out.getvalue(), err.getvalue())


def parse(path):
    with open(path, "rb") as f:
        data = f.read()
    m = Model.Model.GetRootAs(mega_format.strip_trailer(data), 0)
    hp = m.Hparams()
    hparams = {name: getattr(hp, name)() for name in dir(hp)
               if name[0].isupper() and name not in ("Init",) and not name.startswith("GetRoot")
               and callable(getattr(hp, name)) and getattr(hp, name).__code__.co_argcount == 1}
    tensors = {}
    for i in range(m.TensorsLength()):
        t = m.Tensors(i)
        tensors[t.Name().decode()] = (tuple(t.ShapeAsNumpy()), t.Dtype(), t.DataAsNumpy().tobytes())
    st = m.SelfTest()
    return dict(version=m.SchemaVersion(), hparams=hparams, tensors=tensors,
                labels=[m.Labels(i).decode() for i in range(m.LabelsLength())],
                scaling=(m.InputScaling(), m.InputMean(), m.InputStd()),
                st_input=st.InputAsNumpy().copy(), st_logits=st.ExpectedLogitsAsNumpy().copy())


@pytest.fixture
def d(tmp_path):
    """a fresh folder of the test's own, as a string"""
    return str(tmp_path)


def out(d, name="out.mega"):
    return os.path.join(d, name)


def official(d, edit_args=None, edit_model=None):
    ckpt = torch.load(os.path.join(FIX, "tiny_uni.pt"))
    args = argparse.Namespace(**vars(ckpt["args"]))
    if edit_args:
        edit_args(args)
    sd = dict(ckpt["model"])
    if edit_model:
        edit_model(sd)
    path = os.path.join(d, "ckpt.pt")
    torch.save({"args": args, "model": sd}, path)
    return path


def expect_refusal(d, ckpt, needle, extra=()):
    with open(out(d), "wb") as f:
        f.write(b"previous model")
    r = run(ckpt, "-o", out(d), "--labels", LABELS4, *extra)
    assert r.returncode == 1, r.stdout + r.stderr
    assert needle in r.stderr
    with open(out(d), "rb") as f:
        assert f.read() == b"previous model", "existing output was touched"
    assert [f for f in os.listdir(d) if f.startswith(".mega-convert-")] == [], "temp file left"


def test_reproduces_the_committed_model(d):
    r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", out(d), "--labels", LABELS4,
            "--input-mean", "0.01", "--input-std", "0.2")
    assert r.returncode == 0, r.stderr
    for word in ("dims", "parameters", "labels", "EMA direction", "file size"):
        assert word in r.stdout
    a, b = parse(out(d)), parse(os.path.join(FIX, "tiny_uni.mega"))
    for key in ("version", "hparams", "tensors", "labels", "scaling"):
        assert a[key] == b[key], key
    np.testing.assert_array_equal(a["st_input"], b["st_input"])
    np.testing.assert_allclose(a["st_logits"], b["st_logits"], rtol=1e-6, atol=1e-7)


def test_own_checkpoint_carries_its_labels(d):
    r = run(os.path.join(FIX, "tiny_patch.pt"), "-o", out(d))
    assert r.returncode == 0, r.stderr
    a = parse(out(d))
    assert a["labels"] == LABELS4.split(",")
    assert (a["hparams"]["PatchKernel"], a["hparams"]["PatchStride"]) == (5, 2)


def test_fp16_halves_the_tensors(d):
    r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", out(d), "--labels", LABELS4, "--fp16")
    assert r.returncode == 0, r.stderr
    a = parse(out(d))
    name = "layers.0.mega_layer.v_proj.weight"
    assert a["tensors"][name][1] == 1  # DType.F16
    assert len(a["tensors"][name][2]) == (2 * 12 * 8)


def test_missing_tensor_is_named(d):
    ckpt = official(d, edit_model=lambda sd: sd.pop("encoder.encoder.layers.1.mega_layer.h_proj.bias"))
    expect_refusal(d, ckpt, "missing tensor layers.1.mega_layer.h_proj.bias")


def test_wrong_shape_is_named(d):
    def edit(sd):
        sd["encoder.encoder.layers.0.nffn.fc1.weight"] = torch.zeros(12, 9)
    expect_refusal(d, official(d, edit_model=edit), "tensor layers.0.nffn.fc1.weight has shape (12, 9)")


def test_unexpected_tensor_is_named(d):
    def edit(sd):
        sd["encoder.encoder.layers.0.mega_layer.extra"] = torch.zeros(3)
    expect_refusal(d, official(d, edit_model=edit), "unexpected tensor layers.0.mega_layer.extra")


@pytest.mark.parametrize("field, value, needle", [
    ("rel_pos_bias", "rotary", "option rel_pos_bias = 'rotary'"),
    ("sen_rep_type", "cls", "option sen_rep_type = 'cls'"),
    ("attention_activation_fn", "cosine", "option attention_fn = 'cosine'"),
    ("norm_type", "groupnorm", "option norm_type = 'groupnorm'"),
    ("chunk_size", -1, "option chunk_size = -1")])


def test_unsupported_options_are_named(d, field, value, needle):
    expect_refusal(d, official(d, edit_args=lambda a: setattr(a, field, value)), needle)


def test_label_count_must_match(d):
    r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", out(d), "--labels", "a,b,c")
    assert r.returncode == 1
    assert "--labels has 3 labels but the model has 4 classes" in r.stderr
    assert not os.path.exists(out(d))


def test_bad_inputs(d):
    r = run(os.path.join(d, "nope.pt"), "-o", out(d), "--labels", LABELS4)
    assert r.returncode == 1
    assert "no such file" in r.stderr
    junk = os.path.join(d, "junk.pt")
    torch.save({"weights": 1}, junk)
    r = run(junk, "-o", out(d), "--labels", LABELS4)
    assert r.returncode == 1
    assert "not a checkpoint" in r.stderr
    r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", out(d), "--labels", LABELS4, "--input-mean", "0")
    assert r.returncode == 1
    assert "--input-mean and --input-std go together" in r.stderr
    notpt = os.path.join(d, "x.pt")
    with open(notpt, "w") as f:
        f.write("hello")
    r = run(notpt, "-o", out(d), "--labels", LABELS4)
    assert r.returncode == 1, r.stderr
    assert "mega_convert: error:" in r.stderr
    assert "Traceback" not in r.stderr


def test_notes_need_figures_not_placeholders(d):
    # models/sc10-demo.mega's notes said "...accuracy (held-out voices): None ?" (no figure known)
    notes = "Demo model; step/validation accuracy (held-out voices): None ?. See docs/models.md."
    r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", out(d), "--labels", LABELS4, "--notes", notes)
    assert r.returncode == 1, r.stderr
    assert "'step/validation accuracy (held-out voices): None ?' has a placeholder" in r.stderr
    assert not os.path.exists(out(d))
    for fine in ("Demo model; step/validation accuracy (held-out voices): 4000 0.9312. See docs/models.md.",
                 "Is this a question? Yes: see docs/models.md.", ""):
        assert mega_convert.placeholder_clause(fine) is None, fine
    assert mega_convert.placeholder_clause("a: nan; b: 1") == "a: nan"


# mega_unpack.py: .mega -> checkpoint, checked against the file's self-test.
def unpack(model, out):
    return subprocess.run([sys.executable, "-m", UNPACK, model, "-o", out], capture_output=True, text=True)


@pytest.mark.parametrize("source, fp16", [("tiny_logpower.pt", ()), ("tiny_patch.pt", ("--fp16",)),
                                          ("tiny_lognorm.pt", ()), ("tiny_logmel.pt", ())])


def test_round_trip_is_exact(d, source, fp16):
    first, ckpt, second = (os.path.join(d, n) for n in ("a.mega", "a.pt", "b.mega"))
    det = os.path.join(d, "det.json")
    with open(det, "w") as f:
        f.write('{"thresholds": [0.5, 0.6, 0.7, 0.8], "smoothing_hops": 3, "refractory_ms": 700}')
    r = run(os.path.join(FIX, source), "-o", first, "--detection", det, *fp16)
    assert r.returncode == 0, r.stderr
    r = unpack(first, ckpt)
    assert r.returncode == 0, r.stderr
    assert "self-test reproduced" in r.stdout
    ck = torch.load(ckpt)
    assert ck["labels"] == LABELS4.split(",")
    assert ck["detection"]["smoothing_hops"] == 3
    assert ck["detection"]["refractory_ms"] == 700
    np.testing.assert_allclose(ck["detection"]["thresholds"], [0.5, 0.6, 0.7, 0.8], rtol=1e-7)
    r = run(ckpt, "-o", second, "--detection", det, *fp16)
    assert r.returncode == 0, r.stderr
    a, b = parse(first), parse(second)
    for key in ("version", "hparams", "tensors", "labels", "scaling"):
        assert a[key] == b[key], key
    np.testing.assert_array_equal(a["st_logits"], b["st_logits"])
    # the oldest schema that describes it: 3 only with the running mean, 4 with log mel
    assert a["version"] == {"tiny_logmel.pt": 4, "tiny_lognorm.pt": 3, "tiny_logpower.pt": 2}.get(source, 1)


def test_bad_files_are_refused(d):
    good = os.path.join(d, "good.mega")
    r = run(os.path.join(FIX, "tiny_patch.pt"), "-o", good)
    assert r.returncode == 0, r.stderr
    with open(good, "rb") as f:
        data = f.read()
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    cases = [("truncated", data[: len(data) - 100], "no trailer"),
             ("flipped", bytes(flipped), "CRC-32 mismatch"),
             ("empty", b"", "not a .mega file"),
             ("normalized", None, "normalizes its input")]
    for name, content, needle in cases:
        path = os.path.join(d, name + ".mega")
        if content is None:
            path = os.path.join(FIX, "tiny_uni.mega")
        else:
            with open(path, "wb") as f:
                f.write(content)
        out = os.path.join(d, name + ".pt")
        r = unpack(path, out)
        assert r.returncode == 1, (name, r.stdout + r.stderr)
        assert needle in r.stderr, name
        assert "Traceback" not in r.stderr, name
        assert not os.path.exists(out), name
    r = unpack(os.path.join(d, "missing.mega"), os.path.join(d, "m.pt"))
    assert r.returncode == 1
    assert "No such file" in r.stderr


def test_wrong_self_test_is_caught(d):
    # weights edited after the self-test was computed: the unpacked model must be refused
    model, _, extra = mega_torch.load_checkpoint(os.path.join(FIX, "tiny_patch.pt"))

    def hook(tensors):
        return [(n, a * 1.5 if n == "layers.0.nffn.fc2.weight" else a) for n, a in tensors]
    data, _ = mega_convert.build_model_file(model, extra["labels"], tensor_hook=hook)
    path = os.path.join(d, "edited.mega")
    with open(path, "wb") as f:
        f.write(data)
    r = unpack(path, os.path.join(d, "e.pt"))
    assert r.returncode == 1, r.stdout
    assert "misses the file's self-test" in r.stderr


# train.py --patch-norm running_mean: the blocked running mean is the recursion, and the normalized
# front end stays causal (what it gives a token does not depend on later audio).
def test_blocked_mean_is_the_recursion():
    torch.manual_seed(0)
    x, init = torch.randn(3, 301, 5) * 4 - 10, torch.randn(5)
    prev, ref = init.double(), []
    for t in range(x.shape[1]):
        prev = prev + 0.02 * (x[:, t].double() - prev)
        ref.append(prev)
    ref = torch.stack(ref, 1)
    for block in (1, 7, 128, 400):
        got = mega_torch.running_mean(x, 0.02, init, block=block).double()
        assert float((got - ref).abs().max()) < 5e-5, block  # float32 rounding at about 10


def cmn_model():
    cfg = mega_torch.MegaConfig(embed_dim=8, hidden_dim=16, ffn_hidden_dim=16, z_dim=4, n_dim=2, n_layers=1,
                                chunk_size=5, truncation=20, patch_kernel=40, patch_stride=16,
                                window_chunks=2, classifier_dim=8, n_classes=4, patch_features="logpower",
                                patch_norm="running_mean", patch_norm_decay=0.05)
    torch.manual_seed(1)
    model = mega_torch.MegaKWS(cfg)
    with torch.no_grad():
        model.embed_tokens.norm_init.normal_(-8, 1)
    return model.eval()


def test_normalized_front_end_is_causal_and_learns_its_start():
    model = cmn_model()
    s = torch.randn(2, 16 * 5 * 6) * 0.1
    whole = model.embed_tokens(s)
    half = model.embed_tokens(s[:, :16 * 5 * 3])
    torch.testing.assert_close(half, whole[:, :half.shape[1]], rtol=1e-5, atol=1e-5)
    model.embed_tokens(s).sum().backward()
    assert float(model.embed_tokens.norm_init.grad.abs().sum()) > 0.0


@pytest.mark.parametrize("kw, needle", [
    (dict(patch_norm="cmvn"), "option patch_norm = 'cmvn'"),
    (dict(patch_norm="running_mean", patch_norm_decay=1.0), "patch_norm_decay = 1.0"),
    (dict(patch_norm="running_mean"), "needs patch_features = 'logpower'")])


def test_bad_options_are_named(kw, needle):
    features = "linear" if kw.get("patch_norm_decay") is None else "logpower"
    with pytest.raises(ValueError) as e:
        mega_torch.MegaConfig(patch_features=features, **kw).check()
    assert needle in str(e.value)


# ---- detection defaults and labels the runtime would refuse at load: refused here, whatever their source
# (issue 85 item 5) ----

@pytest.mark.parametrize("detection, needle", [
    ('{"thresholds": [0, 0, 0, 0]}', "threshold of label 'class0' is 0; thresholds must be in (0, 1]"),
    ('{"thresholds": [0.5, NaN, 0.5, 0.5]}', "threshold of label 'class1' is nan"),
    ('{"thresholds": [0.5, 0.5, 1.5, 0.5]}', "threshold of label 'class2' is 1.5"),
    ('{"thresholds": [0.5, 0.5, 0.5, -0.1]}', "threshold of label 'class3' is -0.1"),
    ('{"thresholds": [0.5, 0.5, "x", 0.5]}', "threshold of label 'class2' is 'x'"),
    ('{"thresholds": [0.5, 0.5, 0.5]}', "3 thresholds for 4 labels"),
    ('{"thresholds": 0.5}', "thresholds must be a list"),
    ('{"smoothing_hops": 0}', "smoothing_hops = 0 is not an integer in [1, 1024]"),
    ('{"smoothing_hops": 2.5}', "smoothing_hops = 2.5 is not an integer in [1, 1024]"),
    ('{"refractory_ms": -1}', "refractory_ms = -1 is not an integer in [0, 600000]"),
    ('{"refractory_ms": 600001}', "refractory_ms = 600001 is not an integer in [0, 600000]"),
    ('{"threshold": 0.5}', "unknown key 'threshold'"),
    ('[0.5, 0.5, 0.5, 0.5]', "must be a JSON object")])
def test_bad_detection_json_is_refused(d, detection, needle):
    det = os.path.join(d, "det.json")
    with open(det, "w") as f:
        f.write(detection)
    expect_refusal(d, official(d), f"--detection {det}: " + needle, extra=("--detection", det))


def test_the_detection_file_tune_detection_writes_converts(d):
    # what measure_run.sh hands over: tune_detection -o, with its tuned_on record (not stored)
    from mega_kws_tools.evaluation.tune_detection import detection_file
    det = os.path.join(d, "det.json")
    with open(det, "w") as f:
        json.dump(detection_file([0.5, 0.6, 0.7, 0.8], 3, 700, {"stream": "a.wav", "recall": 0.7}), f)
    r = run(official(d), "-o", out(d), "--labels", LABELS4, "--detection", det)
    assert r.returncode == 0, r.stderr
    ck = os.path.join(d, "back.pt")
    assert unpack(out(d), ck).returncode == 0
    assert torch.load(ck)["detection"]["smoothing_hops"] == 3


def own_checkpoint(d, **changes):
    ckpt = torch.load(os.path.join(FIX, "tiny_patch.pt"))
    ckpt.update(changes)
    path = os.path.join(d, "own.pt")
    torch.save(ckpt, path)
    return path


def test_bad_detection_stored_in_the_checkpoint_is_refused(d):
    ckpt = own_checkpoint(d, detection={"thresholds": [0.0] * 4, "smoothing_hops": 1, "refractory_ms": 1000})
    r = run(ckpt, "-o", out(d))
    assert r.returncode == 1 and not os.path.exists(out(d)), r.stdout + r.stderr
    assert "the checkpoint's detection defaults: threshold of label 'class0' is 0" in r.stderr
    # --detection replaces what the checkpoint stores
    det = os.path.join(d, "det.json")
    with open(det, "w") as f:
        f.write('{"thresholds": [0.5, 0.6, 0.7, 0.8]}')
    assert run(ckpt, "-o", out(d), "--detection", det).returncode == 0


def test_repeated_labels_are_refused(d):
    r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", out(d), "--labels", "yes,yes,up,down")
    assert r.returncode == 1 and "label 'yes' appears twice (labels 0 and 1)" in r.stderr, r.stderr
    r = run(own_checkpoint(d, labels=["a", "b", "c", "b"]), "-o", out(d))
    assert r.returncode == 1 and "label 'b' appears twice (labels 1 and 3)" in r.stderr, r.stderr
    r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", out(d), "--labels", "yes,,up,down")
    assert r.returncode == 1 and "label 1 is empty" in r.stderr, r.stderr
    assert not os.path.exists(out(d))


def test_build_model_file_refuses_what_the_runtime_would(d):
    """Its other callers (make_placeholder_model, tests) get the same checks."""
    model, _, extra = mega_torch.load_checkpoint(os.path.join(FIX, "tiny_patch.pt"))
    with pytest.raises(mega_convert.ConvertError, match="threshold of label 'class3' is 0"):
        mega_convert.build_model_file(model, extra["labels"], detection={"thresholds": [0.5, 0.5, 0.5, 0.0]})
    with pytest.raises(mega_convert.ConvertError, match="label 'class0' appears twice"):
        mega_convert.build_model_file(model, ["class0"] * 4)
    # NumPy's numbers are numbers
    tuned = {"thresholds": [np.float32(0.5)] * 4, "smoothing_hops": np.int64(2), "refractory_ms": np.int32(0)}
    mega_convert.build_model_file(model, extra["labels"], detection=tuned)


@pytest.mark.parametrize("name", ["mega_convert", "mega_unpack", "check_official"])
def test_tools_convert_entry_points_run_the_package(name, tmp_path):
    """tools/convert/NAME.py (where the layout names the converter) runs
    mega_kws_tools.convert.NAME from any directory with no PYTHONPATH: the
    same usage as the module's."""
    tools = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = subprocess.run([sys.executable, os.path.join(tools, "convert", name + ".py"), "--help"],
                            capture_output=True, text=True, cwd=tmp_path, env=env)
    module = subprocess.run([sys.executable, "-m", "mega_kws_tools.convert." + name, "--help"],
                            capture_output=True, text=True, cwd=tools, env=env)
    assert script.returncode == 0, script.stderr
    assert module.returncode == 0, module.stderr
    assert script.stdout.startswith("usage: " + name + ".py")
    assert script.stdout == module.stdout


# scripts/keep_layers.py: a .mega file cut to its first N layers (scripts/test_cross.sh's base-model check)
KEEP_LAYERS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(FIX))), "scripts", "keep_layers.py")


def test_keep_layers_keeps_the_first_layers_and_refuses_a_bad_count(d):
    src = os.path.join(FIX, "tiny_logmel.mega")  # two layers
    full, cut, cut_pt = (os.path.join(d, n) for n in ("full.pt", "cut.mega", "cut.pt"))
    assert unpack(src, full).returncode == 0
    r = subprocess.run([sys.executable, KEEP_LAYERS, src, "1", cut], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = unpack(cut, cut_pt)
    assert r.returncode == 0 and "self-test reproduced" in r.stdout, r.stderr
    a, b = torch.load(full), torch.load(cut_pt)
    assert (a["config"]["n_layers"], b["config"]["n_layers"]) == (2, 1)
    kept = [k for k in a["model"] if not k.startswith("layers.") or k.startswith("layers.0.")]
    assert any(k.startswith("layers.1.") for k in a["model"]) and sorted(b["model"]) == sorted(kept)
    for k in kept:
        torch.testing.assert_close(b["model"][k], a["model"][k], rtol=0, atol=0)
    with open(cut, "rb") as f:
        assert b"TEST ONLY: the first 1 layers of tiny_logmel.mega" in f.read()
    for n in ("0", "3"):
        bad = os.path.join(d, f"bad{n}.mega")
        r = subprocess.run([sys.executable, KEEP_LAYERS, src, n, bad], capture_output=True, text=True)
        assert r.returncode == 2 and f"the model has 2 layers: keep 1 to 2, not {n}" in r.stderr, r.stderr
        assert not os.path.exists(bad)

#!/usr/bin/python3
"""Converter tests: reproduces the committed model, refuses what it cannot
represent with a message naming it, and never leaves a half-written file."""

import argparse
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIX = os.path.join(HERE, "fixtures", "data")
CONVERT = "mega_kws_tools.convert.mega_convert"
UNPACK = "mega_kws_tools.convert.mega_unpack"
TOOLS = os.path.join(ROOT, "tools")  # the mega_kws_tools package, for this test and the tools it runs
sys.path.insert(0, TOOLS)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TOOLS, os.environ.get("PYTHONPATH")) if p)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from mega_kws_tools.convert import mega_convert, mega_format  # noqa: E402
from mega_kws_tools import model as mega_torch  # noqa: E402
from mega_kws_tools.convert.schema import Model  # noqa: E402

LABELS4 = "class0,class1,class2,class3"


def run(*args):
    return subprocess.run([sys.executable, "-m", CONVERT, *args], capture_output=True, text=True)


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


class TempDirTest(unittest.TestCase):
    """Each test gets a fresh temporary folder, self.dir."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()


class ConverterTest(TempDirTest):
    def out(self, name="out.mega"):
        return os.path.join(self.dir, name)

    def official(self, edit_args=None, edit_model=None):
        ckpt = torch.load(os.path.join(FIX, "tiny_uni.pt"))
        args = argparse.Namespace(**vars(ckpt["args"]))
        if edit_args:
            edit_args(args)
        sd = dict(ckpt["model"])
        if edit_model:
            edit_model(sd)
        path = os.path.join(self.dir, "ckpt.pt")
        torch.save({"args": args, "model": sd}, path)
        return path

    def expect_refusal(self, ckpt, needle, extra=()):
        with open(self.out(), "wb") as f:
            f.write(b"previous model")
        r = run(ckpt, "-o", self.out(), "--labels", LABELS4, *extra)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(needle, r.stderr)
        with open(self.out(), "rb") as f:
            self.assertEqual(f.read(), b"previous model", "existing output was touched")
        self.assertEqual([f for f in os.listdir(self.dir) if f.startswith(".mega-convert-")], [], "temp file left")

    def test_reproduces_the_committed_model(self):
        r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", self.out(), "--labels", LABELS4,
                "--input-mean", "0.01", "--input-std", "0.2")
        self.assertEqual(r.returncode, 0, r.stderr)
        for word in ("dims", "parameters", "labels", "EMA direction", "file size"):
            self.assertIn(word, r.stdout)
        a, b = parse(self.out()), parse(os.path.join(FIX, "tiny_uni.mega"))
        for key in ("version", "hparams", "tensors", "labels", "scaling"):
            self.assertEqual(a[key], b[key], key)
        np.testing.assert_array_equal(a["st_input"], b["st_input"])
        np.testing.assert_allclose(a["st_logits"], b["st_logits"], rtol=1e-6, atol=1e-7)

    def test_own_checkpoint_carries_its_labels(self):
        r = run(os.path.join(FIX, "tiny_patch.pt"), "-o", self.out())
        self.assertEqual(r.returncode, 0, r.stderr)
        a = parse(self.out())
        self.assertEqual(a["labels"], LABELS4.split(","))
        self.assertEqual((a["hparams"]["PatchKernel"], a["hparams"]["PatchStride"]), (5, 2))

    def test_fp16_halves_the_tensors(self):
        r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", self.out(), "--labels", LABELS4, "--fp16")
        self.assertEqual(r.returncode, 0, r.stderr)
        a = parse(self.out())
        name = "layers.0.mega_layer.v_proj.weight"
        self.assertEqual(a["tensors"][name][1], 1)  # DType.F16
        self.assertEqual(len(a["tensors"][name][2]), 2 * 12 * 8)

    def test_missing_tensor_is_named(self):
        ckpt = self.official(edit_model=lambda sd: sd.pop("encoder.encoder.layers.1.mega_layer.h_proj.bias"))
        self.expect_refusal(ckpt, "missing tensor layers.1.mega_layer.h_proj.bias")

    def test_wrong_shape_is_named(self):
        def edit(sd):
            sd["encoder.encoder.layers.0.nffn.fc1.weight"] = torch.zeros(12, 9)
        self.expect_refusal(self.official(edit_model=edit), "tensor layers.0.nffn.fc1.weight has shape (12, 9)")

    def test_unexpected_tensor_is_named(self):
        def edit(sd):
            sd["encoder.encoder.layers.0.mega_layer.extra"] = torch.zeros(3)
        self.expect_refusal(self.official(edit_model=edit), "unexpected tensor layers.0.mega_layer.extra")

    def test_unsupported_options_are_named(self):
        cases = [("rel_pos_bias", "rotary", "option rel_pos_bias = 'rotary'"),
                 ("sen_rep_type", "cls", "option sen_rep_type = 'cls'"),
                 ("attention_activation_fn", "cosine", "option attention_fn = 'cosine'"),
                 ("norm_type", "groupnorm", "option norm_type = 'groupnorm'"),
                 ("chunk_size", -1, "option chunk_size = -1")]
        for field, value, needle in cases:
            with self.subTest(field=field):
                self.expect_refusal(self.official(edit_args=lambda a: setattr(a, field, value)), needle)

    def test_label_count_must_match(self):
        r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", self.out(), "--labels", "a,b,c")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--labels has 3 labels but the model has 4 classes", r.stderr)
        self.assertFalse(os.path.exists(self.out()))

    def test_bad_inputs(self):
        r = run(os.path.join(self.dir, "nope.pt"), "-o", self.out(), "--labels", LABELS4)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no such file", r.stderr)
        junk = os.path.join(self.dir, "junk.pt")
        torch.save({"weights": 1}, junk)
        r = run(junk, "-o", self.out(), "--labels", LABELS4)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a checkpoint", r.stderr)
        r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", self.out(), "--labels", LABELS4, "--input-mean", "0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--input-mean and --input-std go together", r.stderr)
        notpt = os.path.join(self.dir, "x.pt")
        with open(notpt, "w") as f:
            f.write("hello")
        r = run(notpt, "-o", self.out(), "--labels", LABELS4)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("mega_convert: error:", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_notes_need_figures_not_placeholders(self):
        # models/sc10-demo.mega's notes said "...accuracy (held-out voices): None ?" (no figure known)
        notes = "Demo model; step/validation accuracy (held-out voices): None ?. See docs/models.md."
        r = run(os.path.join(FIX, "tiny_uni.pt"), "-o", self.out(), "--labels", LABELS4, "--notes", notes)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("'step/validation accuracy (held-out voices): None ?' has a placeholder", r.stderr)
        self.assertFalse(os.path.exists(self.out()))
        for fine in ("Demo model; step/validation accuracy (held-out voices): 4000 0.9312. See docs/models.md.",
                     "Is this a question? Yes: see docs/models.md.", ""):
            self.assertIsNone(mega_convert.placeholder_clause(fine), fine)
        self.assertEqual(mega_convert.placeholder_clause("a: nan; b: 1"), "a: nan")


class UnpackTest(TempDirTest):
    """mega_unpack.py: .mega -> checkpoint, checked against the file's self-test."""

    def unpack(self, model, out):
        return subprocess.run([sys.executable, "-m", UNPACK, model, "-o", out], capture_output=True, text=True)

    def test_round_trip_is_exact(self):
        first, ckpt, second = (os.path.join(self.dir, n) for n in ("a.mega", "a.pt", "b.mega"))
        det = os.path.join(self.dir, "det.json")
        with open(det, "w") as f:
            f.write('{"thresholds": [0.5, 0.6, 0.7, 0.8], "smoothing_hops": 3, "refractory_ms": 700}')
        for source, fp16 in (("tiny_logpower.pt", ()), ("tiny_patch.pt", ("--fp16",)), ("tiny_lognorm.pt", ()),
                             ("tiny_logmel.pt", ())):
            with self.subTest(source=source, fp16=bool(fp16)):
                r = run(os.path.join(FIX, source), "-o", first, "--detection", det, *fp16)
                self.assertEqual(r.returncode, 0, r.stderr)
                r = self.unpack(first, ckpt)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("self-test reproduced", r.stdout)
                ck = torch.load(ckpt)
                self.assertEqual(ck["labels"], LABELS4.split(","))
                self.assertEqual(ck["detection"]["smoothing_hops"], 3)
                self.assertEqual(ck["detection"]["refractory_ms"], 700)
                np.testing.assert_allclose(ck["detection"]["thresholds"], [0.5, 0.6, 0.7, 0.8], rtol=1e-7)
                r = run(ckpt, "-o", second, "--detection", det, *fp16)
                self.assertEqual(r.returncode, 0, r.stderr)
                a, b = parse(first), parse(second)
                for key in ("version", "hparams", "tensors", "labels", "scaling"):
                    self.assertEqual(a[key], b[key], key)
                np.testing.assert_array_equal(a["st_logits"], b["st_logits"])
                # the oldest schema that describes it: 3 only with the running mean, 4 with log mel
                self.assertEqual(a["version"], {"tiny_logmel.pt": 4, "tiny_lognorm.pt": 3, "tiny_logpower.pt": 2}.get(source, 1))

    def test_bad_files_are_refused(self):
        good = os.path.join(self.dir, "good.mega")
        r = run(os.path.join(FIX, "tiny_patch.pt"), "-o", good)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(good, "rb") as f:
            data = f.read()
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x10
        cases = [("truncated", data[: len(data) - 100], "no trailer"),
                 ("flipped", bytes(flipped), "CRC-32 mismatch"),
                 ("empty", b"", "not a .mega file"),
                 ("normalized", None, "normalizes its input")]
        for name, content, needle in cases:
            with self.subTest(case=name):
                path = os.path.join(self.dir, name + ".mega")
                if content is None:
                    path = os.path.join(FIX, "tiny_uni.mega")
                else:
                    with open(path, "wb") as f:
                        f.write(content)
                out = os.path.join(self.dir, name + ".pt")
                r = self.unpack(path, out)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(needle, r.stderr)
                self.assertNotIn("Traceback", r.stderr)
                self.assertFalse(os.path.exists(out))
        r = self.unpack(os.path.join(self.dir, "missing.mega"), os.path.join(self.dir, "m.pt"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("No such file", r.stderr)

    def test_wrong_self_test_is_caught(self):
        # weights edited after the self-test was computed: the unpacked model must be refused
        model, _, extra = mega_torch.load_checkpoint(os.path.join(FIX, "tiny_patch.pt"))

        def hook(tensors):
            return [(n, a * 1.5 if n == "layers.0.nffn.fc2.weight" else a) for n, a in tensors]
        data, _ = mega_convert.build_model_file(model, extra["labels"], tensor_hook=hook)
        path = os.path.join(self.dir, "edited.mega")
        with open(path, "wb") as f:
            f.write(data)
        r = self.unpack(path, os.path.join(self.dir, "e.pt"))
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("misses the file's self-test", r.stderr)


class RunningMeanTest(unittest.TestCase):
    """train.py --patch-norm running_mean: the blocked running mean is the recursion, and the
    normalized front end stays causal (what it gives a token does not depend on later audio)."""

    def test_blocked_mean_is_the_recursion(self):
        torch.manual_seed(0)
        x, init = torch.randn(3, 301, 5) * 4 - 10, torch.randn(5)
        prev, ref = init.double(), []
        for t in range(x.shape[1]):
            prev = prev + 0.02 * (x[:, t].double() - prev)
            ref.append(prev)
        ref = torch.stack(ref, 1)
        for block in (1, 7, 128, 400):
            with self.subTest(block=block):
                got = mega_torch.running_mean(x, 0.02, init, block=block).double()
                self.assertLess(float((got - ref).abs().max()), 5e-5)  # float32 rounding at about 10

    def cmn_model(self):
        cfg = mega_torch.MegaConfig(embed_dim=8, hidden_dim=16, ffn_hidden_dim=16, z_dim=4, n_dim=2, n_layers=1,
                                    chunk_size=5, truncation=20, patch_kernel=40, patch_stride=16,
                                    window_chunks=2, classifier_dim=8, n_classes=4, patch_features="logpower",
                                    patch_norm="running_mean", patch_norm_decay=0.05)
        torch.manual_seed(1)
        model = mega_torch.MegaKWS(cfg)
        with torch.no_grad():
            model.embed_tokens.norm_init.normal_(-8, 1)
        return model.eval()

    def test_normalized_front_end_is_causal_and_learns_its_start(self):
        model = self.cmn_model()
        s = torch.randn(2, 16 * 5 * 6) * 0.1
        whole = model.embed_tokens(s)
        half = model.embed_tokens(s[:, :16 * 5 * 3])
        torch.testing.assert_close(half, whole[:, :half.shape[1]], rtol=1e-5, atol=1e-5)
        model.embed_tokens(s).sum().backward()
        self.assertGreater(float(model.embed_tokens.norm_init.grad.abs().sum()), 0.0)

    def test_bad_options_are_named(self):
        for kw, needle in ((dict(patch_norm="cmvn"), "option patch_norm = 'cmvn'"),
                           (dict(patch_norm="running_mean", patch_norm_decay=1.0), "patch_norm_decay = 1.0"),
                           (dict(patch_norm="running_mean"), "needs patch_features = 'logpower'")):
            with self.subTest(**kw), self.assertRaises(ValueError) as e:
                features = "linear" if kw.get("patch_norm_decay") is None else "logpower"
                mega_torch.MegaConfig(patch_features=features, **kw).check()
            self.assertIn(needle, str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)

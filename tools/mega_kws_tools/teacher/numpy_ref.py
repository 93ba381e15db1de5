# SPDX-License-Identifier: Apache-2.0
"""An independent numpy evaluator of the ONNX nodes the teacher's graphs use
(and those of the hey_jarvis check head), written from the ONNX operator
specification (opset 13) and sharing nothing with the torch port but the
graph as data: convolution and pooling are loops over the kernel's offsets,
not a library call. Plain and slow on purpose: it is the reference the port is
judged against, node by node (port_check), and is never optimized. Sums of
products (Conv, MatMul, Gemm) add up in float64 and round once to the input's
type: the most exact float32 answer, which matters for the melspectrogram's
512-tap STFT, whose int16-scale products cancel to bands 80 dB under the
loudest, below float32's own rounding of the sum.

run(graph, feeds, keep_all=False) -> {name: array}: the graph's outputs, or
with keep_all every value the graph computes (each node's outputs).
"""

import itertools

import numpy as np

# ONNX TensorProto data types that these graphs cast to
DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}


def _f(a, like):
    """A float result in the dtype of the input it came from (numpy would widen float32 with a Python scalar)."""
    return np.asarray(a).astype(np.asarray(like).dtype, copy=False)


def _axes(axes, rank):
    return sorted(a + rank if a < 0 else a for a in axes)


def unsqueeze(attrs, x, axes=None):
    axes = list(axes) if axes is not None else attrs["axes"]  # opset 13: an input; before: an attribute
    out = np.asarray(x)
    for a in _axes(axes, out.ndim + len(axes)):
        out = np.expand_dims(out, a)
    return out


def reshape(attrs, x, shape):
    shape = [int(s) for s in shape]
    if attrs.get("allowzero", 0) == 0:  # a 0 copies the input's dimension
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return np.reshape(x, shape)


def transpose(attrs, x):
    return np.transpose(x, attrs.get("perm", list(range(x.ndim))[::-1]))


def _padding(attrs, n_spatial):
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise ValueError(f"auto_pad {attrs['auto_pad']} not supported")
    pads = attrs.get("pads", [0] * (2 * n_spatial))
    return [(pads[i], pads[i + n_spatial]) for i in range(n_spatial)]


def _windows(x, kernel, strides, dilations):
    """For each kernel offset, (offset, the strided view of x it multiplies)."""
    n_spatial = len(kernel)
    out_size = [(x.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(n_spatial)]
    for offset in itertools.product(*[range(k) for k in kernel]):
        index = tuple(slice(offset[i] * dilations[i], offset[i] * dilations[i] + strides[i] * (out_size[i] - 1) + 1,
                            strides[i]) for i in range(n_spatial))
        yield offset, x[(slice(None), slice(None)) + index]


def conv(attrs, x, w, b=None):
    n_spatial = w.ndim - 2
    kernel = list(w.shape[2:])
    if attrs.get("kernel_shape", kernel) != kernel:
        raise ValueError("kernel_shape does not match the weights")
    strides = attrs.get("strides", [1] * n_spatial)
    dilations = attrs.get("dilations", [1] * n_spatial)
    group = attrs.get("group", 1)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + _padding(attrs, n_spatial))
    w = w.astype(np.float64)
    c_in, c_out = w.shape[1], w.shape[0]
    parts = []
    for g in range(group):
        xg = xp[:, g * c_in:(g + 1) * c_in]
        wg = w[g * (c_out // group):(g + 1) * (c_out // group)]
        acc = None
        for offset, view in _windows(xg, kernel, strides, dilations):
            term = np.tensordot(view, wg[(slice(None), slice(None)) + offset], axes=([1], [1]))  # [N, *out, O]
            acc = term if acc is None else acc + term
        parts.append(np.moveaxis(acc, -1, 1))
    y = np.concatenate(parts, axis=1)
    if b is not None:
        y = y + b.reshape([1, -1] + [1] * n_spatial)
    return _f(y, x)


def max_pool(attrs, x):
    kernel = attrs["kernel_shape"]
    n_spatial = len(kernel)
    if attrs.get("ceil_mode", 0) != 0:
        raise ValueError("MaxPool ceil_mode not supported")
    strides = attrs.get("strides", [1] * n_spatial)
    dilations = attrs.get("dilations", [1] * n_spatial)
    xp = np.pad(x, [(0, 0), (0, 0)] + _padding(attrs, n_spatial), constant_values=-np.inf)
    out = None
    for _, view in _windows(xp, kernel, strides, dilations):
        out = view.copy() if out is None else np.maximum(out, view)
    return out


def clip(attrs, x, lo=None, hi=None):
    y = x
    if lo is not None:
        y = np.maximum(y, lo)
    if hi is not None:
        y = np.minimum(y, hi)
    return _f(y, x)


def reduce(fn):
    def op(attrs, x):
        axes = attrs.get("axes")
        axes = tuple(_axes(axes, x.ndim)) if axes is not None else None  # no axes: every axis
        return _f(fn(x, axis=axes, keepdims=bool(attrs.get("keepdims", 1))), x)
    return op


def gemm(attrs, a, b, c=None):
    like = a
    a = a.T if attrs.get("transA", 0) else a
    b = b.T if attrs.get("transB", 0) else b
    y = attrs.get("alpha", 1.0) * (a.astype(np.float64) @ b.astype(np.float64))
    if c is not None:
        y = y + attrs.get("beta", 1.0) * c
    return _f(y, like)


def flatten(attrs, x):
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


def if_(attrs, cond, env):
    branch = attrs["then_branch"] if bool(np.asarray(cond).reshape(-1)[0]) else attrs["else_branch"]
    inner = _evaluate(branch, dict(env), keep_all=False)
    return [inner[name] for name in branch.outputs]


OPS = {
    "Constant": lambda attrs: np.asarray(attrs["value"]),
    "Identity": lambda attrs, x: x,
    "Unsqueeze": unsqueeze,
    "Reshape": reshape,
    "Transpose": transpose,
    "Flatten": flatten,
    "Cast": lambda attrs, x: np.asarray(x).astype(DTYPES[attrs["to"]]),
    "Add": lambda attrs, a, b: _f(np.add(a, b), a),
    "Sub": lambda attrs, a, b: _f(np.subtract(a, b), a),
    "Mul": lambda attrs, a, b: _f(np.multiply(a, b), a),
    "Div": lambda attrs, a, b: _f(np.divide(a, b), a),
    "Pow": lambda attrs, a, b: _f(np.power(a, b), a),
    "Max": lambda attrs, *xs: _f(np.maximum.reduce(np.broadcast_arrays(*xs)), xs[0]),
    "MatMul": lambda attrs, a, b: _f(np.matmul(a.astype(np.float64), b.astype(np.float64)), a),
    "Gemm": gemm,
    "Log": lambda attrs, x: _f(np.log(x), x),
    "Sqrt": lambda attrs, x: _f(np.sqrt(x), x),
    "Relu": lambda attrs, x: _f(np.maximum(x, 0), x),
    "LeakyRelu": lambda attrs, x: _f(np.where(x >= 0, x, attrs.get("alpha", 0.01) * x), x),
    "Sigmoid": lambda attrs, x: _f(1.0 / (1.0 + np.exp(-x)), x),
    "GreaterOrEqual": lambda attrs, a, b: np.greater_equal(a, b),
    "Clip": clip,
    "ReduceMax": reduce(np.max),
    "ReduceMean": reduce(np.mean),
    "Conv": conv,
    "MaxPool": max_pool,
}


def _evaluate(graph, env: dict, keep_all: bool) -> dict:
    computed = {}
    for node in graph.nodes:
        if node.op not in OPS and node.op != "If":
            raise ValueError(f"op {node.op} (node {node.name}) not supported by the numpy evaluator")
        args = [env[name] if name else None for name in node.inputs]
        while args and args[-1] is None:  # trailing optional inputs left out
            args.pop()
        outs = if_(node.attrs, args[0], env) if node.op == "If" else OPS[node.op](node.attrs, *args)
        outs = outs if isinstance(outs, list) else [outs]
        for name, value in zip(node.outputs, outs):
            env[name] = value
            computed[name] = value
    return computed if keep_all else {name: env[name] for name in graph.outputs}


def run(graph, feeds: dict, keep_all: bool = False) -> dict:
    """The graph's outputs (with keep_all, every node's outputs) for the inputs `feeds` ({name: array})."""
    missing = [name for name in graph.inputs if name not in feeds]
    if missing:
        raise ValueError(f"inputs missing: {missing}")
    env = dict(graph.weights)
    env.update({k: np.asarray(v) for k, v in feeds.items()})
    return _evaluate(graph, env, keep_all)

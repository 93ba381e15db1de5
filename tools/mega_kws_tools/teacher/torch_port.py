# SPDX-License-Identifier: Apache-2.0
"""The teacher's ONNX graphs as frozen torch modules: the port.

PortedGraph(graph) holds the graph's weights as buffers (they move with
.to(device) and are never trained) and runs its nodes in order with torch ops,
so the teacher runs batched, on a GPU, inside a training step. It supports the
ops of openWakeWord's melspectrogram and embedding graphs; anything else is
refused when the module is built, naming the node.

dtype=torch.float64 runs a graph in double precision (its float weights and
inputs cast once): the melspectrogram's 512-tap STFT sums int16-scale
products that cancel to bands 80 dB under the loudest, where float32's
rounding of the sum moved them by up to 1.9 dB on a sweep. features.Teacher
runs the melspectrogram so; it is a small part of the teacher's work.

One deliberate option: the melspectrogram's ReduceMax has no axes, so in ONNX
it takes the maximum over the whole batch (its 80 dB floor then depends on the
other clips). With per_item_max=True it takes each clip's own maximum, which is
what openWakeWord gets by running one clip at a time; port_check tests that a
batch then equals the clips run alone.
"""

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {1: torch.float32, 6: torch.int32, 7: torch.int64, 9: torch.bool, 11: torch.float64}


def _pairs(attrs, n_spatial):
    """F.pad's padding (last dimension first) from ONNX pads [begin..., end...]."""
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise ValueError(f"auto_pad {attrs['auto_pad']} not supported")
    pads = attrs.get("pads", [0] * (2 * n_spatial))
    out = []
    for i in reversed(range(n_spatial)):
        out += [pads[i], pads[i + n_spatial]]
    return out


def conv(attrs, x, w, b=None):
    n_spatial = w.dim() - 2
    fn = {1: F.conv1d, 2: F.conv2d}[n_spatial]
    x = F.pad(x, _pairs(attrs, n_spatial))
    return fn(x, w, b, stride=attrs.get("strides", [1] * n_spatial), dilation=attrs.get("dilations", [1] * n_spatial),
              groups=attrs.get("group", 1))


def max_pool(attrs, x):
    kernel = attrs["kernel_shape"]
    if attrs.get("ceil_mode", 0) != 0 or len(kernel) != 2:
        raise ValueError("only 2-d MaxPool without ceil_mode is supported")
    x = F.pad(x, _pairs(attrs, 2), value=float("-inf"))
    return F.max_pool2d(x, kernel, stride=attrs.get("strides", [1, 1]), dilation=attrs.get("dilations", [1, 1]))


def unsqueeze(attrs, x, axes=None):
    axes = [int(a) for a in (axes if axes is not None else attrs["axes"])]
    rank = x.dim() + len(axes)
    for a in sorted(a + rank if a < 0 else a for a in axes):
        x = x.unsqueeze(a)
    return x


def reshape(attrs, x, shape):
    shape = [int(s) for s in shape]
    if attrs.get("allowzero", 0) == 0:
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def clip(attrs, x, lo=None, hi=None):
    if lo is not None:
        x = torch.maximum(x, lo)
    if hi is not None:
        x = torch.minimum(x, hi)
    return x


def leaky_relu(attrs, x):
    return F.leaky_relu(x, attrs.get("alpha", 0.01))


def reduce_max(attrs, x, per_item):
    axes = attrs.get("axes")
    keep = bool(attrs.get("keepdims", 1))
    if axes is not None:
        return torch.amax(x, dim=[int(a) for a in axes], keepdim=keep)
    if per_item:  # each batch item's own maximum, kept broadcastable against it
        return torch.amax(x, dim=list(range(1, x.dim())), keepdim=True)
    return torch.amax(x, dim=list(range(x.dim())), keepdim=keep)


OPS = {
    "Unsqueeze": unsqueeze,
    "Reshape": reshape,
    "Transpose": lambda attrs, x: x.permute(*attrs.get("perm", list(range(x.dim()))[::-1])),
    "Cast": lambda attrs, x: x.to(DTYPES[attrs["to"]]),
    "Add": lambda attrs, a, b: a + b,
    "Sub": lambda attrs, a, b: a - b,
    "Mul": lambda attrs, a, b: a * b,
    "Div": lambda attrs, a, b: a / b,
    "Pow": lambda attrs, a, b: torch.pow(a, b),
    "Max": lambda attrs, a, *rest: _max(a, rest),
    "MatMul": lambda attrs, a, b: torch.matmul(a, b),
    "Log": lambda attrs, x: torch.log(x),
    "LeakyRelu": leaky_relu,
    "Clip": clip,
    "Conv": conv,
    "MaxPool": max_pool,
}


def _max(a, rest):
    for b in rest:
        a = torch.maximum(a, b)
    return a


class PortedGraph(torch.nn.Module):
    """A graph (graph.Graph) run with torch ops; weights and Constant values as buffers."""

    def __init__(self, graph, per_item_max: bool = False, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.graph = graph
        self.per_item_max = per_item_max
        self.dtype = dtype
        self._buffer_of = {}
        values = dict(graph.weights)
        for node in graph.nodes:
            if node.op == "Constant":
                values[node.outputs[0]] = node.attrs["value"]
            elif node.op not in OPS and node.op != "ReduceMax":
                raise ValueError(f"op {node.op} (node {node.name}) not supported by the torch port")
        for i, (name, value) in enumerate(values.items()):
            self._buffer_of[name] = f"value_{i}"
            self.register_buffer(f"value_{i}", self._cast(torch.from_numpy(np.array(value))), persistent=False)

    def _cast(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.dtype) if t.is_floating_point() else t

    def forward(self, *inputs):
        env = self.run(dict(zip(self.graph.inputs, inputs)))
        outs = [env[name] for name in self.graph.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, feeds: dict, keep_all: bool = False) -> dict:
        """The graph's outputs, or with keep_all every node's outputs, for feeds {name: tensor}."""
        env = {name: getattr(self, buf) for name, buf in self._buffer_of.items()}
        env.update({name: self._cast(t) for name, t in feeds.items()})
        computed = {}
        for node in self.graph.nodes:
            if node.op == "Constant":
                computed[node.outputs[0]] = env[node.outputs[0]]
                continue
            args = [env[name] if name else None for name in node.inputs]
            while args and args[-1] is None:
                args.pop()
            if node.op == "ReduceMax":
                out = reduce_max(node.attrs, args[0], self.per_item_max)
            else:
                out = OPS[node.op](node.attrs, *args)
            env[node.outputs[0]] = computed[node.outputs[0]] = out
        return computed if keep_all else {name: env[name] for name in self.graph.outputs}

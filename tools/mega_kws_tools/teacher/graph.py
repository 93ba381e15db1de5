# SPDX-License-Identifier: Apache-2.0
"""An ONNX graph as plain Python data, read once with Debian's python3-onnx:
its nodes in order (op type, input and output names, attributes as Python and
numpy values), its weights (initializers) as numpy arrays, and the names of
its real inputs and outputs. Both evaluators (numpy_ref and torch_port) run
from this; neither looks at the protobuf again."""

import dataclasses

import numpy as np
import onnx
from onnx import numpy_helper


@dataclasses.dataclass
class Node:
    op: str
    inputs: list
    outputs: list
    attrs: dict
    name: str = ""


@dataclasses.dataclass
class Graph:
    nodes: list
    weights: dict
    inputs: list
    outputs: list

    def op_types(self) -> set:
        return {n.op for n in self.nodes}


def _attr(a: onnx.AttributeProto):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, onnx.GraphProto):
        return from_proto(v)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    return v


def from_proto(g: onnx.GraphProto) -> Graph:
    weights = {i.name: np.array(numpy_helper.to_array(i)) for i in g.initializer}
    nodes = [Node(n.op_type, list(n.input), list(n.output), {a.name: _attr(a) for a in n.attribute}, n.name)
             for n in g.node]
    return Graph(nodes, weights, [i.name for i in g.input if i.name not in weights], [o.name for o in g.output])


def load(path: str) -> Graph:
    return from_proto(onnx.load(path).graph)

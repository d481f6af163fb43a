#!/usr/bin/python3
"""A small ResNet-like conv net whose whole network sits inside an If.

  /usr/bin/python3 bench/make_if_model.py bench/models/if_convnet.onnx

Inputs: x float[1, 3, 96, 96] and cond bool (a scalar). The then-branch is
the net (Conv + BatchNormalization + Relu stems, residual blocks, MaxPool,
GlobalAveragePool, Gemm) reading its weights from the main graph's
initializers (outer scope); one weight is stored flat and reshaped inside
the branch (a constant to fold there). The else-branch returns zeros.
Weights are seeded random values. The same net without the If is written
next to it (`_flat` suffix) as the yardstick.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(3)
inits = []
nodes = []
counter = [0]


def name(prefix):
    counter[0] += 1
    return f"{prefix}{counter[0]}"


def init(prefix, array):
    n = name(prefix)
    inits.append(numpy_helper.from_array(array.astype(np.float32), n))
    return n


def conv_bn(x, cin, cout, k, stride, relu=True, flat_weight=False):
    w = rng.normal(0, (2.0 / (cin * k * k)) ** 0.5, size=(cout, cin, k, k))
    if flat_weight:
        w_flat = init("wflat", w.reshape(-1))
        shape = name("wshape")
        inits.append(numpy_helper.from_array(np.array(w.shape, np.int64), shape))
        w_name = name("w")
        nodes.append(helper.make_node("Reshape", [w_flat, shape], [w_name], name=name("reshape")))
    else:
        w_name = init("w", w)
    c = name("conv")
    nodes.append(helper.make_node("Conv", [x, w_name], [c], name=c, kernel_shape=[k, k], strides=[stride, stride],
                                  pads=[k // 2] * 4))
    bn = name("bn")
    nodes.append(helper.make_node(
        "BatchNormalization",
        [c, init("scale", rng.uniform(0.5, 1.5, cout)), init("bias", rng.normal(0, 0.1, cout)),
         init("mean", rng.normal(0, 0.1, cout)), init("var", rng.uniform(0.5, 1.5, cout))], [bn], name=bn))
    if not relu:
        return bn
    r = name("relu")
    nodes.append(helper.make_node("Relu", [bn], [r], name=r))
    return r


def block(x, c):
    a = conv_bn(x, c, c, 3, 1)
    b = conv_bn(a, c, c, 3, 1, relu=False)
    s = name("add")
    nodes.append(helper.make_node("Add", [b, x], [s], name=s))
    r = name("relu")
    nodes.append(helper.make_node("Relu", [s], [r], name=r))
    return r


def net(x):
    h = conv_bn(x, 3, 32, 3, 2, flat_weight=True)  # 48x48
    h = block(h, 32)
    h = conv_bn(h, 32, 64, 3, 2)  # 24x24
    h = block(h, 64)
    h = block(h, 64)
    p = name("pool")
    nodes.append(helper.make_node("MaxPool", [h], [p], name=p, kernel_shape=[2, 2], strides=[2, 2]))  # 12x12
    h = conv_bn(p, 64, 128, 3, 1)
    h = block(h, 128)
    g = name("gap")
    nodes.append(helper.make_node("GlobalAveragePool", [h], [g], name=g))
    f = name("flat")
    nodes.append(helper.make_node("Flatten", [g], [f], name=f))
    y = name("logits")
    nodes.append(helper.make_node("Gemm", [f, init("fcw", rng.normal(0, 0.05, (10, 128))),
                                           init("fcb", np.zeros(10))], [y], name=y, transB=1))
    return y


def main():
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        sys.exit(__doc__)
    out = sys.argv[1] if len(sys.argv) > 1 else "bench/models/if_convnet.onnx"
    y = net("x")
    body_nodes = list(nodes)
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 96, 96])
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    opset = [helper.make_opsetid("", 17)]

    # The net alone.
    body_nodes_flat = body_nodes + [helper.make_node("Identity", [y], ["y"], name="out")]
    flat = helper.make_model(helper.make_graph(body_nodes_flat, "convnet", [x_info], [y_info], inits),
                             opset_imports=opset)
    onnx.checker.check_model(flat)
    onnx.save(flat, out.replace(".onnx", "_flat.onnx"))

    # The net as the then-branch of an If on `cond`.
    then_out = helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 10])
    then_graph = helper.make_graph(body_nodes, "then_net", [], [then_out])
    zeros = numpy_helper.from_array(np.zeros((1, 10), np.float32), "zeros")
    else_graph = helper.make_graph([helper.make_node("Identity", ["zeros"], ["z"], name="else_out")], "else_zeros",
                                   [], [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 10])])
    if_node = helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_graph, else_branch=else_graph)
    cond_info = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    model = helper.make_model(helper.make_graph([if_node], "if_convnet", [x_info, cond_info], [y_info],
                                                inits + [zeros]), opset_imports=opset)
    onnx.checker.check_model(model)
    onnx.save(model, out)
    print("wrote", out, "and", out.replace(".onnx", "_flat.onnx"))


if __name__ == "__main__":
    main()

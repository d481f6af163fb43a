#!/usr/bin/python3
"""A small voice-activity model whose whole network sits inside an If (one
branch per sample rate), the kind of model where fixed per-node and per-run
costs decide the latency.

  /usr/bin/python3 bench/make_vad_model.py bench/models/vad_if.onnx

Inputs: input float[1, 576] (a 512-sample chunk and 64 samples of context at
16 kHz), state float[2, 1, 128] (the recurrent state, h then c) and sr int64
(a scalar, the sample rate). The main graph tests sr == 16000 and runs one of
two branches, each reading its weights from the main graph's initializers:
reflect padding, a strided Conv with fixed Fourier filters (a short-time
Fourier transform), the magnitude of the real and imaginary halves, four
Conv + Relu encoder layers, one LSTM step on the state, Relu, a 1x1 Conv and
a Sigmoid. Outputs: output float[1, 1] (speech probability) and stateN
float[2, 1, 128]. The 8 kHz branch has half the window. Weights are seeded
random values.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(5)
HIDDEN = 128


class Builder:
    def __init__(self, prefix, inits):
        self.prefix = prefix
        self.inits = inits
        self.nodes = []
        self.count = 0

    def name(self, what):
        self.count += 1
        return f"{self.prefix}_{what}{self.count}"

    def const(self, what, array):
        n = self.name(what)
        self.inits.append(numpy_helper.from_array(array, n))
        return n

    def node(self, op, inputs, what=None, outputs=1, **attrs):
        outs = [self.name(what or op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=outs[0], **attrs))
        return outs[0] if outputs == 1 else outs


def fourier_filters(window):
    """Real and imaginary parts of the first window/2 + 1 DFT rows, Hann windowed: [window + 2, 1, window]."""
    bins = window // 2 + 1
    n = np.arange(window)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * n / window)
    k = np.arange(bins)[:, None]
    real = np.cos(2 * np.pi * k * n / window) * hann
    imag = -np.sin(2 * np.pi * k * n / window) * hann
    return np.concatenate([real, imag]).astype(np.float32)[:, None, :], bins


def branch(prefix, inits, window, chunk):
    b = Builder(prefix, inits)
    hop = window // 2
    pad = window // 4
    # [1, chunk] -> [1, 1, chunk + 2 * pad]: reflect padding of the time axis.
    x = b.node("Unsqueeze", ["input", b.const("axis", np.array([1], np.int64))])
    x = b.node("Pad", [x, b.const("pads", np.array([0, 0, pad, 0, 0, pad], np.int64))], mode="reflect")
    filters, bins = fourier_filters(window)
    spec = b.node("Conv", [x, b.const("stft", filters)], kernel_shape=[window], strides=[hop])
    real = b.node("Slice", [spec, b.const("s", np.array([0], np.int64)), b.const("e", np.array([bins], np.int64)),
                            b.const("a", np.array([1], np.int64))])
    imag = b.node("Slice", [spec, b.const("s", np.array([bins], np.int64)),
                            b.const("e", np.array([2 * bins], np.int64)), b.const("a", np.array([1], np.int64))])
    power = b.node("Add", [b.node("Mul", [real, real]), b.node("Mul", [imag, imag])])
    h = b.node("Sqrt", [power])
    # Encoder: Conv1d + Relu, strides 1, 2, 2, 1.
    channels = [bins, 128, 64, 64, 128]
    for i, stride in enumerate([1, 2, 2, 1]):
        cin, cout = channels[i], channels[i + 1]
        w = rng.normal(0, (2.0 / (cin * 3)) ** 0.5, size=(cout, cin, 3)).astype(np.float32)
        bias = rng.normal(0, 0.05, size=cout).astype(np.float32)
        h = b.node("Conv", [h, b.const("w", w), b.const("b", bias)], kernel_shape=[3], pads=[1, 1],
                   strides=[stride])
        h = b.node("Relu", [h])
    # One LSTM step: [1, 128, 1] -> sequence [1, 1, 128]; state [2, 1, 128] = (h, c).
    seq = b.node("Transpose", [h], perm=[2, 0, 1])
    h0 = b.node("Slice", ["state", b.const("s", np.array([0], np.int64)), b.const("e", np.array([1], np.int64)),
                          b.const("a", np.array([0], np.int64))])
    c0 = b.node("Slice", ["state", b.const("s", np.array([1], np.int64)), b.const("e", np.array([2], np.int64)),
                          b.const("a", np.array([0], np.int64))])
    scale = (1.0 / HIDDEN) ** 0.5
    wx = rng.uniform(-scale, scale, size=(1, 4 * HIDDEN, 128)).astype(np.float32)
    wh = rng.uniform(-scale, scale, size=(1, 4 * HIDDEN, HIDDEN)).astype(np.float32)
    bias = rng.uniform(-scale, scale, size=(1, 8 * HIDDEN)).astype(np.float32)
    _, h1, c1 = b.node("LSTM", [seq, b.const("wx", wx), b.const("wh", wh), b.const("lb", bias), "", h0, c0],
                       outputs=3, hidden_size=HIDDEN)
    state = b.node("Concat", [h1, c1], axis=0)
    # Decoder: Relu, 1x1 Conv to one channel, Sigmoid, [1, 1].
    d = b.node("Transpose", [b.node("Relu", [h1])], perm=[1, 2, 0])  # [1, 128, 1]
    wd = rng.normal(0, 0.1, size=(1, HIDDEN, 1)).astype(np.float32)
    d = b.node("Conv", [d, b.const("wd", wd), b.const("bd", np.zeros(1, np.float32))], kernel_shape=[1])
    prob = b.node("Sigmoid", [d])
    out = b.node("Reshape", [prob, b.const("shape", np.array([1, 1], np.int64))])
    outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1]),
               helper.make_tensor_value_info(state, TensorProto.FLOAT, [2, 1, HIDDEN])]
    return helper.make_graph(b.nodes, prefix, [], outputs)


def main():
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        sys.exit(__doc__)
    out = sys.argv[1] if len(sys.argv) > 1 else "bench/models/vad_if.onnx"
    inits = []
    then_graph = branch("sr16k", inits, window=256, chunk=576)
    else_graph = branch("sr8k", inits, window=128, chunk=576)
    inits.append(numpy_helper.from_array(np.array(16000, np.int64), "sr16000"))
    nodes = [helper.make_node("Equal", ["sr", "sr16000"], ["is16k"], name="is16k"),
             helper.make_node("If", ["is16k"], ["output", "stateN"], name="by_rate", then_branch=then_graph,
                              else_branch=else_graph)]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 576]),
              helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, HIDDEN]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, [])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1]),
               helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, 1, HIDDEN])]
    model = helper.make_model(helper.make_graph(nodes, "vad_if", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, out)
    print("wrote", out)


if __name__ == "__main__":
    main()

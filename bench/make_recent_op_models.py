#!/usr/bin/env python3
"""Benchmark models written with ops of recent opsets, seeded random weights.

  /usr/bin/python3 bench/make_recent_op_models.py [DIR]   (default bench/models)

Writes:
  decoder_op23.onnx  4 pre-norm blocks at opset 23: RMSNormalization, Q/K/V
                     MatMuls, Attention (3-D, 8 heads, causal), output
                     MatMul, residual Add; hidden 512, sequence 128.
  llama_op24.onnx    2 LLaMA-style blocks at opset 24: RMSNormalization,
                     RotaryEmbedding on Q and K (position_ids into a
                     1024-row cache), grouped-query Attention (8 query, 2 kv
                     heads) with a KV cache and its present outputs, and a
                     Swish-gated feed-forward; symbolic sequence and cache
                     lengths.
  stft_400.onnx,     STFT of 10 s of 16 kHz audio, hop 160, Hann window of
  stft_512.onnx      400 (Whisper's n_fft) and 512 values, one-sided.

bench/ort_compare.py --models decoder_op23,llama_op24,stft_400,stft_512
measures them against ONNX Runtime (its seeded inputs fit every model).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))


def weight(rng, name, shape, scale=0.04):
    return nh.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def save(graph, opset, ir_version, path):
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = ir_version
    onnx.save(model, path)
    print("wrote", path)


def decoder_op23(rng, path):
    hidden, heads, seq = 512, 8, 128
    nodes, inits, x = [], [], "x"
    for layer in range(4):
        for w in "qkvo":
            inits.append(weight(rng, f"w{w}{layer}", [hidden, hidden]))
        inits.append(weight(rng, f"g{layer}", [hidden], 1.0))
        nodes += [
            h.make_node("RMSNormalization", [x, f"g{layer}"], [f"n{layer}"], axis=-1),
            h.make_node("MatMul", [f"n{layer}", f"wq{layer}"], [f"q{layer}"]),
            h.make_node("MatMul", [f"n{layer}", f"wk{layer}"], [f"k{layer}"]),
            h.make_node("MatMul", [f"n{layer}", f"wv{layer}"], [f"v{layer}"]),
            h.make_node("Attention", [f"q{layer}", f"k{layer}", f"v{layer}"], [f"a{layer}"], q_num_heads=heads,
                        kv_num_heads=heads, is_causal=1),
            h.make_node("MatMul", [f"a{layer}", f"wo{layer}"], [f"o{layer}"]),
            h.make_node("Add", [x, f"o{layer}"], [f"x{layer}"]),
        ]
        x = f"x{layer}"
    graph = h.make_graph(nodes, "decoder_op23", [h.make_tensor_value_info("x", T.FLOAT, [1, seq, hidden])],
                         [h.make_tensor_value_info(x, T.FLOAT, [1, seq, hidden])], inits)
    save(graph, 23, 11, path)


def llama_op24(rng, path):
    hidden, heads, kv_heads, head, ffn = 512, 8, 2, 64, 1024
    inits = [weight(rng, "cos", [1024, head // 2], 1.0), weight(rng, "sin", [1024, head // 2], 1.0)]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [1, "S", hidden]),
              h.make_tensor_value_info("position_ids", T.INT64, [1, "S"])]
    nodes, outputs, x = [], [], "x"
    for l in range(2):
        inputs += [h.make_tensor_value_info(f"past_k{l}", T.FLOAT, [1, kv_heads, "P", head]),
                   h.make_tensor_value_info(f"past_v{l}", T.FLOAT, [1, kv_heads, "P", head])]
        inits += [weight(rng, f"g{l}", [hidden], 1.0), weight(rng, f"g2{l}", [hidden], 1.0),
                  weight(rng, f"wq{l}", [hidden, heads * head]), weight(rng, f"wk{l}", [hidden, kv_heads * head]),
                  weight(rng, f"wv{l}", [hidden, kv_heads * head]), weight(rng, f"wo{l}", [heads * head, hidden]),
                  weight(rng, f"w1{l}", [hidden, ffn]), weight(rng, f"w3{l}", [hidden, ffn]),
                  weight(rng, f"w2{l}", [ffn, hidden])]
        nodes += [
            h.make_node("RMSNormalization", [x, f"g{l}"], [f"n{l}"], epsilon=1e-6),
            h.make_node("MatMul", [f"n{l}", f"wq{l}"], [f"q{l}"]),
            h.make_node("MatMul", [f"n{l}", f"wk{l}"], [f"k{l}"]),
            h.make_node("MatMul", [f"n{l}", f"wv{l}"], [f"v{l}"]),
            h.make_node("RotaryEmbedding", [f"q{l}", "cos", "sin", "position_ids"], [f"qr{l}"], num_heads=heads),
            h.make_node("RotaryEmbedding", [f"k{l}", "cos", "sin", "position_ids"], [f"kr{l}"], num_heads=kv_heads),
            h.make_node("Attention", [f"qr{l}", f"kr{l}", f"v{l}", "", f"past_k{l}", f"past_v{l}"],
                        [f"a{l}", f"present_k{l}", f"present_v{l}"], q_num_heads=heads, kv_num_heads=kv_heads,
                        is_causal=1),
            h.make_node("MatMul", [f"a{l}", f"wo{l}"], [f"o{l}"]),
            h.make_node("Add", [x, f"o{l}"], [f"h{l}"]),
            h.make_node("RMSNormalization", [f"h{l}", f"g2{l}"], [f"m{l}"], epsilon=1e-6),
            h.make_node("MatMul", [f"m{l}", f"w1{l}"], [f"u{l}"]),
            h.make_node("Swish", [f"u{l}"], [f"su{l}"]),
            h.make_node("MatMul", [f"m{l}", f"w3{l}"], [f"up{l}"]),
            h.make_node("Mul", [f"su{l}", f"up{l}"], [f"gate{l}"]),
            h.make_node("MatMul", [f"gate{l}", f"w2{l}"], [f"d{l}"]),
            h.make_node("Add", [f"h{l}", f"d{l}"], [f"x{l}"]),
        ]
        outputs += [h.make_tensor_value_info(f"present_k{l}", T.FLOAT, None),
                    h.make_tensor_value_info(f"present_v{l}", T.FLOAT, None)]
        x = f"x{l}"
    graph = h.make_graph(nodes, "llama_op24", inputs, [h.make_tensor_value_info(x, T.FLOAT, None)] + outputs, inits)
    save(graph, 24, 12, path)


def stft(n_fft, path):
    inits = [nh.from_array(np.hanning(n_fft).astype(np.float32), "window"),
             nh.from_array(np.array(160, np.int64), "hop"), nh.from_array(np.array(n_fft, np.int64), "n_fft")]
    graph = h.make_graph([h.make_node("STFT", ["signal", "hop", "window", "n_fft"], ["spectrum"], onesided=1)],
                         f"stft_{n_fft}", [h.make_tensor_value_info("signal", T.FLOAT, [1, 160000, 1])],
                         [h.make_tensor_value_info("spectrum", T.FLOAT, None)], inits)
    save(graph, 17, 8, path)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "models")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    decoder_op23(rng, os.path.join(folder, "decoder_op23.onnx"))
    llama_op24(rng, os.path.join(folder, "llama_op24.onnx"))
    for n in (400, 512):
        stft(n, os.path.join(folder, f"stft_{n}.onnx"))


if __name__ == "__main__":
    main()

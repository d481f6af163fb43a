"""Writes a decoder in the form ONNX Runtime's generative-AI model builder
gives LLMs (opset 21): token embedding, per layer SimplifiedLayerNormalization
or SkipSimplifiedLayerNormalization, MatMulNBits (4-bit, or 8-bit, block 32) for the
packed QKV, output, gate, up and down projections, GroupQueryAttention with
rotary embedding (4096 positions; 256 in the test cases) and a past
key/value cache, SiLU gating, and an lm_head;
seqlens_k and total_sequence_length from attention_mask. Seeded random
weights. The moe cases take gpt-oss's form: sink logits, a local window
on every other layer, and QMoE SwiGLU experts.

  /usr/bin/python3 bench/make_genai_model.py OUT.onnx [layers [hidden [vocab [bits]]]]
  /usr/bin/python3 bench/make_genai_model.py --cases FOLDER
      writes FOLDER/genai_{prompt,decode,decode_8bit,moe_prompt,moe_decode}/ (2-layer, width-64 models with
      seeded inputs and ONNX Runtime's outputs; ORT_NODE=<onnxruntime-node
      1.30>): testdata/models/attention_ort was made with it.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper
from onnx import numpy_helper as nh

from make_attention_cases import save_data_set

BLOCK = 32


def build(layers, dm, vocab, heads, kv_heads, ffn, positions=256, seed=0, bits=4, experts=0):
    """experts > 0: gpt-oss's form: attention with per-head sink logits, a
    local window of 4 on even layers, and a mixture of `experts` SwiGLU
    experts (QMoE, 4-bit blocks of 32, top 2) instead of the gated MLP."""
    rng = np.random.default_rng(seed)
    h = dm // heads
    nodes, inits = [], []

    def init(name, a):
        inits.append(nh.from_array(a, name))
        return name

    def nbits(name, x, k, n):
        blocks = k // BLOCK
        codes = rng.integers(0, 256, (n, blocks, BLOCK * bits // 8)).astype(np.uint8)
        scales = (rng.uniform(0.5, 1.5, (n * blocks,)) / np.sqrt(k) / 4 / (1 if bits == 4 else 16)).astype(np.float32)
        zeros = rng.integers(0, 256, (n * ((blocks + 1) // 2 if bits == 4 else blocks),)).astype(np.uint8)
        nodes.append(helper.make_node(
            'MatMulNBits', [x, init(name + '.codes', codes), init(name + '.scales', scales),
                            init(name + '.zero_points', zeros)], [name + '.out'], domain='com.microsoft',
            K=k, N=n, bits=bits, block_size=BLOCK, name=name))
        return name + '.out'

    angles = np.outer(np.arange(positions), 1.0 / (10000 ** (np.arange(0, h, 2) / h)))
    cos = init('cos_cache', np.cos(angles).astype(np.float32))
    sin = init('sin_cache', np.sin(angles).astype(np.float32))
    nodes.append(helper.make_node('Gather', [init('embed', (rng.standard_normal((vocab, dm)) * 0.5).astype(np.float32)),
                                             'input_ids'], ['h0']))
    nodes.append(helper.make_node('ReduceSum', ['attention_mask', init('axis1', np.array([1], np.int64))], ['mask_sum'],
                                  keepdims=0))
    nodes.append(helper.make_node('Sub', ['mask_sum', init('one', np.array(1, np.int64))], ['seqlens_k64']))
    nodes.append(helper.make_node('Cast', ['seqlens_k64'], ['seqlens_k'], to=T.INT32))
    nodes.append(helper.make_node('Shape', ['attention_mask'], ['mask_shape']))
    nodes.append(helper.make_node('Gather', ['mask_shape', init('index1', np.array(1, np.int64))], ['total64'], axis=0))
    nodes.append(helper.make_node('Cast', ['total64'], ['total_sequence_length'], to=T.INT32))
    inputs = [helper.make_tensor_value_info('input_ids', T.INT64, ['batch', 'sequence']),
              helper.make_tensor_value_info('attention_mask', T.INT64, ['batch', 'total'])]
    outputs = [helper.make_tensor_value_info('logits', T.FLOAT, ['batch', 'sequence', vocab])]
    x, skip = 'h0', None
    for l in range(layers):
        gamma = init(f'layers.{l}.input_norm', rng.uniform(0.8, 1.2, dm).astype(np.float32))
        if skip is None:
            nodes.append(helper.make_node('SimplifiedLayerNormalization', [x, gamma], [f'layers.{l}.norm'],
                                          epsilon=1e-5, axis=-1))
            residual = x
        else:
            nodes.append(helper.make_node('SkipSimplifiedLayerNormalization', [x, skip, gamma],
                                          [f'layers.{l}.norm', '', '', f'layers.{l}.residual'],
                                          domain='com.microsoft', epsilon=1e-5))
            residual = f'layers.{l}.residual'
        qkv = nbits(f'layers.{l}.qkv', f'layers.{l}.norm', dm, (heads + 2 * kv_heads) * h)
        for kind in ('key', 'value'):
            inputs.append(helper.make_tensor_value_info(f'past_key_values.{l}.{kind}', T.FLOAT,
                                                        ['batch', kv_heads, 'past', h]))
            outputs.append(helper.make_tensor_value_info(f'present.{l}.{kind}', T.FLOAT,
                                                         ['batch', kv_heads, 'total', h]))
        gqa_inputs = [qkv, '', '', f'past_key_values.{l}.key', f'past_key_values.{l}.value', 'seqlens_k',
                      'total_sequence_length', cos, sin]
        gqa_attrs = {}
        if experts:
            gqa_inputs += ['', '', init(f'layers.{l}.sinks', rng.standard_normal(heads).astype(np.float32))]
            if l % 2 == 0:
                gqa_attrs['local_window_size'] = 4
        nodes.append(helper.make_node(
            'GroupQueryAttention', gqa_inputs, [f'layers.{l}.attention', f'present.{l}.key', f'present.{l}.value'],
            domain='com.microsoft', num_heads=heads, kv_num_heads=kv_heads, do_rotary=1, name=f'layers.{l}.gqa',
            **gqa_attrs))
        out = nbits(f'layers.{l}.o_proj', f'layers.{l}.attention', heads * h, dm)
        gamma2 = init(f'layers.{l}.post_norm', rng.uniform(0.8, 1.2, dm).astype(np.float32))
        nodes.append(helper.make_node('SkipSimplifiedLayerNormalization', [out, residual, gamma2],
                                      [f'layers.{l}.mlp_in', '', '', f'layers.{l}.mlp_residual'],
                                      domain='com.microsoft', epsilon=1e-5))
        if experts:
            router = init(f'layers.{l}.router', (rng.standard_normal((dm, experts)) / np.sqrt(dm)).astype(np.float32))
            nodes.append(helper.make_node('MatMul', [f'layers.{l}.mlp_in', router], [f'layers.{l}.logits']))
            nodes.append(helper.make_node('Reshape', [f'layers.{l}.logits', init(f'layers.{l}.rows', np.array(
                [-1, experts], np.int64))], [f'layers.{l}.router_probs']))
            def codes(name, out, k):
                return [init(name, rng.integers(0, 256, (experts, out, k // 2)).astype(np.uint8)),
                        init(name + '.scales', (rng.uniform(0.5, 1.5, (experts, out, k // BLOCK)) / np.sqrt(k) / 4)
                             .astype(np.float32)),
                        init(name + '.bias', (rng.standard_normal((experts, out)) * 0.1).astype(np.float32))]
            nodes.append(helper.make_node(
                'QMoE', [f'layers.{l}.mlp_in', f'layers.{l}.router_probs'] + codes(f'layers.{l}.fc1', 2 * ffn, dm) +
                codes(f'layers.{l}.fc2', dm, ffn), [f'layers.{l}.moe'], domain='com.microsoft', k=2,
                activation_type='swiglu', swiglu_fusion=1, swiglu_limit=7.0, activation_alpha=1.702,
                activation_beta=1.0, expert_weight_bits=4, block_size=BLOCK, normalize_routing_weights=1))
            x = f'layers.{l}.moe'
        else:
            gate = nbits(f'layers.{l}.gate', f'layers.{l}.mlp_in', dm, ffn)
            up = nbits(f'layers.{l}.up', f'layers.{l}.mlp_in', dm, ffn)
            nodes.append(helper.make_node('Sigmoid', [gate], [f'layers.{l}.gate_sigmoid']))
            nodes.append(helper.make_node('Mul', [gate, f'layers.{l}.gate_sigmoid'], [f'layers.{l}.silu']))
            nodes.append(helper.make_node('Mul', [f'layers.{l}.silu', up], [f'layers.{l}.act']))
            x = nbits(f'layers.{l}.down', f'layers.{l}.act', ffn, dm)
        skip = f'layers.{l}.mlp_residual'
    nodes.append(helper.make_node('SkipSimplifiedLayerNormalization',
                                  [x, skip, init('final_norm', rng.uniform(0.8, 1.2, dm).astype(np.float32))],
                                  ['final'], domain='com.microsoft', epsilon=1e-5))
    nodes.append(helper.make_node(
        'MatMul', ['final', init('lm_head', (rng.standard_normal((dm, vocab)) / np.sqrt(dm)).astype(np.float32))],
        ['logits']))
    graph = helper.make_graph(nodes, 'decoder', inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 21), helper.make_opsetid('com.microsoft', 1)])
    model.ir_version = 10
    return model


def write_case(folder, model, batch, seq, past, layers, kv_heads, h, vocab, seed):
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(folder, 'test_data_set_0'), exist_ok=True)
    onnx.save(model, os.path.join(folder, 'model.onnx'))
    feeds = [('input_ids', rng.integers(0, vocab, (batch, seq)).astype(np.int64)),
             ('attention_mask', np.ones((batch, past + seq), np.int64))]
    for l in range(layers):
        for kind in ('key', 'value'):
            feeds.append((f'past_key_values.{l}.{kind}', rng.standard_normal((batch, kv_heads, past, h)).astype(np.float32)))
    save_data_set(folder, feeds)


def main():
    if sys.argv[1] == '--cases':
        model = build(layers=2, dm=64, vocab=100, heads=4, kv_heads=2, ffn=128)
        write_case(os.path.join(sys.argv[2], 'genai_prompt'), model, 1, 5, 0, 2, 2, 16, 100, 1)
        write_case(os.path.join(sys.argv[2], 'genai_decode'), model, 2, 1, 5, 2, 2, 16, 100, 2)
        model = build(layers=2, dm=64, vocab=100, heads=4, kv_heads=2, ffn=128, bits=8)
        write_case(os.path.join(sys.argv[2], 'genai_decode_8bit'), model, 1, 1, 5, 2, 2, 16, 100, 3)
        model = build(layers=2, dm=64, vocab=100, heads=4, kv_heads=2, ffn=64, experts=4)
        write_case(os.path.join(sys.argv[2], 'genai_moe_prompt'), model, 1, 6, 0, 2, 2, 16, 100, 4)
        write_case(os.path.join(sys.argv[2], 'genai_moe_decode'), model, 2, 1, 7, 2, 2, 16, 100, 5)
        return
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    dm = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    vocab = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    bits = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    onnx.save(build(layers, dm, vocab, heads=dm // 64, kv_heads=max(1, dm // 256), ffn=2 * dm, positions=4096,
                    bits=bits), sys.argv[1])


if __name__ == '__main__':
    main()

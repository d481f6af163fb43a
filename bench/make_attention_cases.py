"""Writes one-node models of ONNX Runtime's attention contrib ops with
seeded inputs, and ONNX Runtime's outputs for them, as test cases
(model.onnx + test_data_set_0/input_N.pb, output_N.pb):
MultiHeadAttention, Attention (past state, attention bias, masks),
RotaryEmbedding, GroupQueryAttention (prompt, decoding, ragged batches,
rotary, local window, packed QKV, attention bias, softcap, sink logits,
position_ids), MoE (activations, top-k routing, SwiGLU) and QMoE.

testdata/models/attention_ort/ was made with it (ONNX Runtime 1.30, CPU):
  ORT_NODE=<onnxruntime-node 1.30> /usr/bin/python3 bench/make_attention_cases.py testdata/models/attention_ort
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ELEM = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64, np.uint8: TensorProto.UINT8}
JS = {np.float32: 'float32', np.int32: 'int32', np.int64: 'int64', np.uint8: 'uint8'}


def write_case(root, name, op, inputs, attrs, n_out=1, constants=(), symbolic=()):
    """inputs: (name, array or None) in the op's order; None leaves the input
    out; names in `constants` become initializers; inputs named in `symbolic`
    are declared with symbolic dims."""
    folder = os.path.join(root, name)
    os.makedirs(os.path.join(folder, 'test_data_set_0'), exist_ok=True)
    outs = [f'out{i}' for i in range(n_out)]
    node = helper.make_node(op, [n if a is not None else '' for n, a in inputs], outs,
                            domain='com.microsoft', **attrs)
    feeds, graph_inputs, inits = [], [], []
    for n, a in inputs:
        if a is None:
            continue
        if n in constants:
            inits.append(numpy_helper.from_array(a, n))
        else:
            feeds.append((n, a))
            dims = [f'{n}_{i}' for i in range(a.ndim)] if n in symbolic else list(a.shape)
            graph_inputs.append(helper.make_tensor_value_info(n, ELEM[a.dtype.type], dims))
    graph_outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
    graph = helper.make_graph([node], name, graph_inputs, graph_outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17),
                                                    helper.make_opsetid('com.microsoft', 1)])
    model.ir_version = 8
    onnx.save(model, os.path.join(folder, 'model.onnx'))
    save_data_set(folder, feeds)


def save_data_set(folder, feeds):
    """folder/test_data_set_0: `feeds` ((name, array) in graph-input order)
    as input_N.pb, and ONNX Runtime's outputs of folder/model.onnx for them
    as output_N.pb."""
    os.makedirs(os.path.join(folder, 'test_data_set_0'), exist_ok=True)
    for i, (n, a) in enumerate(feeds):
        onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(folder, 'test_data_set_0', f'input_{i}.pb'))
    with tempfile.TemporaryDirectory() as tmp:
        spec = {n: {'dtype': JS[a.dtype.type], 'shape': list(a.shape), 'values': a.flatten().tolist()}
                for n, a in feeds}
        with open(os.path.join(tmp, 'in.json'), 'w') as f:
            json.dump(spec, f)
        subprocess.run(['node', os.path.join(HERE, 'ort_outputs.js'), os.path.join(folder, 'model.onnx'),
                        os.path.join(tmp, 'in.json'), os.path.join(tmp, 'out.json')], check=True)
        with open(os.path.join(tmp, 'out.json')) as f:
            result = json.load(f)
    for i, o in enumerate(result):
        a = np.array(o['values'], dtype=np.float32).reshape(o['dims'])
        onnx.save_tensor(numpy_helper.from_array(a, o['name']),
                         os.path.join(folder, 'test_data_set_0', f'output_{i}.pb'))


def main(root):
    rng = np.random.default_rng(7)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    i32 = lambda v: np.array(v, np.int32)

    # MultiHeadAttention: B 2, S 3, L 4, N 2, H 4.
    B, S, L, N, H = 2, 3, 4, 2, 4
    D = N * H
    mha = lambda name, ins, attrs=None, n_out=1: write_case(
        root, name, 'MultiHeadAttention', ins, dict({'num_heads': N}, **(attrs or {})), n_out)
    mha('mha_bias', [('q', f(B, S, D)), ('k', f(B, L, D)), ('v', f(B, L, D)), ('bias', f(3 * D))])
    mha('mha_scale_value_width', [('q', f(B, S, D)), ('k', f(B, L, D)), ('v', f(B, L, 2 * D)),
                                  ('bias', f(4 * D))], {'scale': 0.3})
    mha('mha_causal', [('q', f(B, S, D)), ('k', f(B, S, D)), ('v', f(B, S, D))], {'unidirectional': 1})
    mha('mha_key_lengths', [('q', f(B, S, D)), ('k', f(B, L, D)), ('v', f(B, L, D)), ('bias', None),
                            ('mask', i32([2, 4]))])
    mha('mha_key_mask', [('q', f(B, S, D)), ('k', f(B, L, D)), ('v', f(B, L, D)), ('bias', None),
                         ('mask', i32([[1, 1, 0, 1], [1, 0, 0, 0]]))])
    mha('mha_query_key_mask', [('q', f(B, S, D)), ('k', f(B, L, D)), ('v', f(B, L, D)), ('bias', None),
                               ('mask', rng.integers(0, 2, (B, S, L)).astype(np.int32))])
    mha('mha_attention_bias', [('q', f(B, S, D)), ('k', f(B, L, D)), ('v', f(B, L, D)), ('bias', None),
                               ('mask', None), ('attention_bias', f(1, N, S, L))])
    mha('mha_past', [('q', f(B, S, D)), ('k', f(B, S, D)), ('v', f(B, S, D)), ('bias', f(3 * D)),
                     ('mask', None), ('attention_bias', None), ('past_key', f(B, N, 5, H)),
                     ('past_value', f(B, N, 5, H))], {'unidirectional': 1}, n_out=3)
    mha('mha_cross_cache', [('q', f(B, S, D)), ('k', f(B, N, L, H)), ('v', f(B, N, L, H))])

    # Attention: input width 5.
    I = 5
    att = lambda name, ins, attrs=None, n_out=1: write_case(
        root, name, 'Attention', ins, dict({'num_heads': N}, **(attrs or {})), n_out)
    att('attention_past_causal', [('x', f(B, S, I)), ('w', f(I, 3 * D)), ('b', f(3 * D)), ('mask', None),
                                  ('past', f(2, B, N, 4, H))], {'unidirectional': 1}, n_out=2)
    att('attention_bias_and_mask', [('x', f(B, S, I)), ('w', f(I, 3 * D)), ('b', f(3 * D)),
                                    ('mask', i32([[1, 1, 0], [1, 0, 1]])), ('past', None),
                                    ('attention_bias', f(B, 1, S, S))])
    att('attention_query_key_mask', [('x', f(B, S, I)), ('w', f(I, 3 * D)), ('b', f(3 * D)),
                                     ('mask', rng.integers(0, 2, (B, S, S)).astype(np.int32))])

    # RotaryEmbedding: caches of 16 positions.
    M = 16
    angles = rng.uniform(0, 6, (M, H // 2))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    positions = rng.integers(0, M, (B, S)).astype(np.int64)
    rope = lambda name, x, pos, attrs: write_case(
        root, name, 'RotaryEmbedding', [('x', x), ('position_ids', pos), ('cos', cos), ('sin', sin)], attrs,
        constants=('cos', 'sin'))
    rope('rotary_4d', f(B, N, S, H), positions, {})
    rope('rotary_3d_interleaved', f(B, S, D), positions, {'interleaved': 1})
    rope('rotary_3d_first_position', f(B, S, D), np.array([3], np.int64), {})
    rope('rotary_4d_first_position_interleaved', f(B, N, S, H), np.array([5], np.int64), {'interleaved': 1})
    rope('rotary_3d_partial', f(B, S, N * 8), positions, {'rotary_embedding_dim': 4, 'num_heads': N})
    rope('rotary_4d_partial_interleaved', f(B, N, S, 8), positions,
         {'interleaved': 1, 'rotary_embedding_dim': 4, 'num_heads': N})

    # GroupQueryAttention: N 4 query heads over 2 key/value heads.
    NQ, NKV = 4, 2
    def caches(width):
        a = rng.uniform(0, 6, (32, width))
        return np.cos(a).astype(np.float32), np.sin(a).astype(np.float32)
    def gqa(name, s, past, seqlens, total, attrs=None, rotary=None, packed=False, bias=None, b=2, h=8,
            position_ids=None, head_sink=None, symbolic=()):
        ins = [('query', f(b, s, (NQ + 2 * NKV) * h)), ('key', None), ('value', None)] if packed else [
            ('query', f(b, s, NQ * h)), ('key', f(b, s, NKV * h)), ('value', f(b, s, NKV * h))]
        ins += [('past_key', None if past is None else f(b, NKV, past, h)),
                ('past_value', None if past is None else f(b, NKV, past, h)),
                ('seqlens_k', i32(seqlens)), ('total_sequence_length', i32([total]))]
        ins += [('cos', None), ('sin', None)] if rotary is None else [('cos', rotary[0]), ('sin', rotary[1])]
        if bias is not None or position_ids is not None or head_sink is not None:
            ins += [('position_ids', position_ids), ('attention_bias', bias), ('head_sink', head_sink)]
            while ins[-1][1] is None:
                ins.pop()
        write_case(root, name, 'GroupQueryAttention', ins,
                   dict({'num_heads': NQ, 'kv_num_heads': NKV}, **(attrs or {})), 3, constants=('cos', 'sin'),
                   symbolic=symbolic)
    gqa('gqa_prompt_padded', 4, None, [3, 1], 4)
    gqa('gqa_prompt_empty_past', 4, 0, [3, 2], 4)
    gqa('gqa_decode_ragged', 1, 5, [5, 3], 6)
    gqa('gqa_decode_long_buffer', 1, 8, [5, 3], 6)
    gqa('gqa_chunk', 3, 4, [6], 7, b=1)
    gqa('gqa_prompt_rotary_interleaved', 4, None, [3, 2], 4, {'do_rotary': 1, 'rotary_interleaved': 1},
        rotary=caches(8), h=16)
    gqa('gqa_decode_rotary_ragged', 1, 5, [5, 2], 6, {'do_rotary': 1}, rotary=caches(8), h=16)
    gqa('gqa_decode_partial_rotary', 1, 5, [5, 4], 6, {'do_rotary': 1}, rotary=caches(8), h=32)
    gqa('gqa_packed_rotary', 3, 4, [6], 7, {'do_rotary': 1}, rotary=caches(8), packed=True, b=1, h=16)
    gqa('gqa_local_window', 5, None, [4, 4], 5, {'local_window_size': 2})
    gqa('gqa_local_window_decode', 1, 6, [6, 6], 7, {'local_window_size': 3})
    gqa('gqa_attention_bias_scale', 3, 4, [6], 7, {'scale': 0.2}, bias=f(1, 1, 3, 7), b=1)
    gqa('gqa_attention_bias_per_head', 1, 5, [5, 3], 6, bias=f(2, NQ, 1, 6))
    # Soft-capped scores, sink logits (gpt-oss), position_ids for the rotary
    # positions: of a decoding step as given; of the first prompt, ONNX
    # Runtime reads the first value and counts on from it for every batch.
    gqa('gqa_softcap_padded', 4, None, [3, 1], 4, {'softcap': 1.5})
    gqa('gqa_softcap_local_window_decode', 1, 6, [6, 4], 7, {'softcap': 3.0, 'local_window_size': 3})
    gqa('gqa_smooth_softmax_decode', 1, 5, [5, 3], 6, {'smooth_softmax': 1})
    gqa('gqa_head_sink_prompt', 4, None, [3, 2], 4, head_sink=f(NQ))
    gqa('gqa_head_sink_bias_decode', 1, 5, [5, 3], 6, {'softcap': 2.0}, bias=f(2, NQ, 1, 6), head_sink=f(NQ))
    gqa('gqa_head_sink_bias_of_unknown_heads', 3, 4, [6], 7, {'softcap': 2.0}, bias=f(1, NQ, 3, 7),
        head_sink=f(NQ), b=1, symbolic=('attention_bias',))
    gqa('gqa_position_ids_decode', 1, 5, [5, 2], 6, {'do_rotary': 1}, rotary=caches(8), h=16,
        position_ids=np.array([[9], [2]], np.int64))
    gqa('gqa_position_ids_prompt', 4, None, [3, 2], 4, {'do_rotary': 1, 'rotary_interleaved': 1},
        rotary=caches(8), h=16, position_ids=np.array([[3, 9, 1, 2], [5, 6, 7, 8]], np.int64))
    gqa('gqa_position_ids_chunk', 3, 4, [6], 7, {'do_rotary': 1}, rotary=caches(8), packed=True, b=1, h=16,
        position_ids=np.array([[11, 12, 13]], np.int64))

    # MoE: 4 experts, hidden 8, inner 16 (32 for SwiGLU's gate and linear
    # values, interleaved); fc1 [E, F, H] and fc2 [E, H, I] (out by in).
    E, H, I = 4, 8, 16
    def moe(name, x, attrs, inner=I, biases=True):
        rows = int(np.prod(x.shape[:-1]))
        ins = [('input', x), ('router_probs', f(rows, E)), ('fc1', f(E, inner, H) * 0.5),
               ('fc1_bias', f(E, inner) if biases else None), ('fc2', f(E, H, I) * 0.5),
               ('fc2_bias', f(E, H) if biases else None)]
        while ins[-1][1] is None:
            ins.pop()
        write_case(root, name, 'MoE', [(n, a if a is None else a.astype(np.float32)) for n, a in ins], attrs, 1)
    moe('moe_relu_top2', f(5, H), {'k': 2, 'activation_type': 'relu'})
    moe('moe_gelu_3d', f(2, 3, H), {'k': 2, 'activation_type': 'gelu'})
    moe('moe_silu_normalized', f(6, H), {'k': 3, 'activation_type': 'silu', 'normalize_routing_weights': 1})
    moe('moe_identity_top1_no_bias', f(4, H), {'activation_type': 'identity'}, biases=False)
    moe('moe_swiglu_limit', f(1, 4, H), {'k': 2, 'activation_type': 'swiglu', 'swiglu_fusion': 1,
                                         'swiglu_limit': 0.7, 'activation_alpha': 1.702, 'activation_beta': 1.0},
        inner=2 * I)
    moe('moe_swiglu_defaults', f(3, H), {'k': 2, 'activation_type': 'swiglu', 'swiglu_fusion': 1}, inner=2 * I)

    # QMoE: fc1 and fc2 as uint8 codes along the input axis (4 bits two a
    # byte, low first; or 8), (code - 2^(bits-1)) * scale per output row or
    # per block; ONNX Runtime renormalizes the top k weights whatever
    # normalize_routing_weights says.
    H, I = 32, 32
    def qmoe(name, rows, bits, block, attrs, inner=I, biases=False):
        per = 8 // bits
        scales = lambda o, n: rng.uniform(0.01, 0.05, (E, o, n // block) if block else (E, o)).astype(np.float32)
        ins = [('input', f(rows, H)), ('router_probs', f(rows, E)),
               ('fc1', rng.integers(0, 256, (E, inner, H // per)).astype(np.uint8)), ('fc1_scales', scales(inner, H)),
               ('fc1_bias', f(E, inner) if biases else None),
               ('fc2', rng.integers(0, 256, (E, H, I // per)).astype(np.uint8)), ('fc2_scales', scales(H, I)),
               ('fc2_bias', f(E, H) if biases else None)]
        while ins[-1][1] is None:
            ins.pop()
        write_case(root, name, 'QMoE', ins, dict({'expert_weight_bits': bits}, **attrs), 1)
    qmoe('qmoe_4bit_per_row', 3, 4, 0, {'k': 2, 'activation_type': 'relu'})
    qmoe('qmoe_8bit_blocks', 3, 8, 16, {'k': 2, 'activation_type': 'silu', 'block_size': 16})
    qmoe('qmoe_4bit_swiglu', 4, 4, 16, {'k': 2, 'activation_type': 'swiglu', 'swiglu_fusion': 1, 'swiglu_limit': 0.3,
                                        'activation_alpha': 1.702, 'activation_beta': 1.0, 'block_size': 16,
                                        'normalize_routing_weights': 1}, inner=2 * I, biases=True)


if __name__ == '__main__':
    main(sys.argv[1])

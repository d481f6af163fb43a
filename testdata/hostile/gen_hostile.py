#!/usr/bin/python3
"""Generates the hostile-model catalogue in this folder (tests/apps/hostile_check_test.cc).

Run with Debian's python3 (python3-onnx 1.12, python3-numpy):
    /usr/bin/python3 testdata/hostile/gen_hostile.py

One case per malformed or hostile input of section (c) of
shared/research/reliability.md (classes A1-A7, B1-B13, C1-C12, D1-D17 and,
with --full, F1-F10). Each case is written to <name>.onnx, or to
<name>/model.onnx when it needs files of its own (external data), and
described in manifest.json:

  name         the case (also the test name)
  file         the model, relative to this folder (and to the test's working
               folder, into which the test copies it)
  class        the catalogue entry, e.g. "D4"
  description  what is hostile about it
  expect_code  the checker/rules.def code that must be among the diagnostics
  expect_exit  1 (invalid) or 3 (refused)
  flags        extra `onnxkit check` flags, e.g. ["--full"]
  setup        steps the test runs first, in its working folder (paths are
               relative to it; FIFOs, symlinks, hard links and big files
               cannot be committed):
                 fifo:PATH            mkfifo
                 socket:PATH          a bound unix socket
                 dir:PATH             mkdir -p
                 file:PATH:BYTES      a regular file of BYTES zero bytes
                 sparse:PATH:BYTES    a sparse file of BYTES bytes (ftruncate)
                 symlink:LINK->TARGET symlink (TARGET verbatim, may be absolute)
                 hardlink:LINK->TARGET
                 repeat:PATH:PREFIX:UNIT:COUNT:SUFFIX  PREFIX + UNIT x COUNT +
                                      SUFFIX (hex), for files too big to commit

Bytes protobuf tooling would refuse to write (truncated varints, bad wire
types, duplicate singular fields, 10,000-deep nesting, invalid UTF-8) are
built by hand with the wire helpers below. Output is deterministic.
"""
import json
import os
import random
import shutil

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = []

FULL = ["--full"]

# --- Protobuf wire helpers ------------------------------------------------


def varint(n):
    n &= (1 << 64) - 1  # negative int64 as protobuf writes it (10 bytes)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(field, wire_type):
    return varint((field << 3) | wire_type)


def vint(field, n):
    return tag(field, 0) + varint(n)


def ld(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return tag(field, 2) + varint(len(payload)) + payload


def ser(message):
    return message.SerializeToString()


# --- Model helpers --------------------------------------------------------


def vi(name, elem=TensorProto.FLOAT, shape=(1,)):
    return helper.make_tensor_value_info(name, elem, shape)


def opset(domain="", version=17):
    return helper.make_opsetid(domain, version)


def graph(nodes, inputs, outputs, inits=(), name="main", sparse=(), value_info=()):
    g = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(inits))
    g.sparse_initializer.extend(sparse)
    g.value_info.extend(value_info)
    return g


def model(g, opsets=None, ir=8, functions=()):
    m = helper.make_model(g, opset_imports=opsets if opsets is not None else [opset()],
                          producer_name="gen_hostile")
    m.ir_version = ir
    m.functions.extend(functions)
    return m


def relu_model(**kw):
    """x -> Relu -> y: a valid model to mutate."""
    return model(graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x")], [vi("y")]), **kw)


def one_node(node, inputs, outputs, inits=(), opsets=None, **kw):
    return model(graph([node], inputs, outputs, inits, **kw), opsets=opsets)


def float_init(name, dims, raw=None, floats=None):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(dims))
    if raw is not None:
        t.raw_data = raw
    if floats is not None:
        t.float_data.extend(floats)
    return t


def init_model(tensor, inputs=None):
    """A model whose only node adds initializer `tensor` to input x."""
    node = helper.make_node("Add", ["x", tensor.name], ["y"], name="add")
    return model(graph([node], inputs or [vi("x")], [vi("y")], [tensor]))


def external_tensor(name, dims, entries, data_type=TensorProto.FLOAT):
    t = TensorProto(name=name, data_type=data_type, dims=list(dims))
    t.data_location = TensorProto.EXTERNAL
    for k, v in entries:
        e = t.external_data.add()
        e.key = k
        e.value = v
    return t


# --- Writing --------------------------------------------------------------


def write_bytes(relative, data):
    path = os.path.join(HERE, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def add(name, cls, description, code, exit_code, data=None, flags=(), setup=(), folder=False,
        extra_files=None, file=None):
    """Registers a case; `data` is a ModelProto or bytes (None: made by setup)."""
    assert exit_code in (1, 3), name
    assert all(c["name"] != name for c in CASES), name
    if file is None:
        file = f"{name}/model.onnx" if folder or extra_files else f"{name}.onnx"
    if data is not None:
        write_bytes(file, data if isinstance(data, bytes) else ser(data))
    for rel, content in (extra_files or {}).items():
        write_bytes(f"{name}/{rel}", content)
    CASES.append({
        "name": name,
        "file": file,
        "class": cls,
        "description": description,
        "expect_code": code,
        "expect_exit": exit_code,
        "flags": list(flags),
        "setup": list(setup),
    })


# --- A. Container and protobuf layer --------------------------------------


def container_cases():
    rng = random.Random(20240607)
    good = ser(relu_model())
    add("a1_empty_file", "A1", "empty file (zero bytes)", "E0102", 1, b"")
    add("a1_random_bytes", "A1", "4 KiB of seeded random bytes, starting with an invalid wire type 7",
        "E0101", 1, b"\x0f" + bytes(rng.randrange(256) for _ in range(4095)))
    add("a1_truncated_varint", "A1", "ir_version varint cut after two continuation bytes", "E0101", 1,
        b"\x08\xff\xff")
    add("a1_overlong_varint", "A1", "ir_version varint of 11 bytes (over the 10-byte maximum)", "E0101", 1,
        b"\x08" + b"\xff" * 10 + b"\x01")
    add("a1_length_past_end", "A1", "graph field claims 100 bytes, 5 follow", "E0101", 1,
        vint(1, 8) + tag(7, 2) + varint(100) + b"\x0a\x03abc")
    add("a1_length_prefix_2pow63", "A1", "graph field length prefix 2^63 (a signed-size overflow bait)",
        "E0101", 1, vint(1, 8) + tag(7, 2) + varint(1 << 63) + b"\x00" * 16)
    add("a1_wire_type_7", "A1", "field tag with the invalid wire type 7", "E0101", 1, vint(1, 8) + b"\x0f\x00")
    add("a1_wire_type_6", "A1", "graph.node with the invalid wire type 6 inside the graph", "E0101", 1,
        vint(1, 8) + ld(7, b"\x0e\x00"))
    add("a1_unmatched_end_group", "A1", "end-group tag with no start-group", "E0101", 1,
        vint(1, 8) + b"\x0c")
    add("a1_unterminated_group", "A1", "start-group (field 99) never closed", "E0101", 1,
        vint(1, 8) + tag(99, 3) + vint(1, 5))
    add("a1_field_number_zero", "A1", "tag with field number 0", "E0101", 1, b"\x00\x01")
    add("a1_truncated_model", "A1", "a valid model cut in the middle of its graph", "E0101", 1,
        good[:len(good) * 2 // 3])
    add("a1_packed_float_bad_length", "A1",
        "initializer float_data packed with 7 bytes (not a multiple of 4)", "E0101", 1,
        vint(1, 8) + ld(8, ld(1, "") + vint(2, 17)) +
        ld(7, ld(2, "main") + ld(5, vint(1, 2) + vint(2, 1) + ld(8, "w") + ld(4, b"\x00" * 7))))
    add("a1_protobuf_not_onnx", "A1", "a valid protobuf message with only unknown fields", "E0102", 1,
        ld(30, "this is not a model") + vint(31, 7))
    add("a1_graph_wrong_wire_type", "A1",
        "the graph field (7) sent as a varint: parsed as an unknown field, so the model has no graph",
        "E0209", 1, vint(1, 8) + ld(8, ld(1, "") + vint(2, 17)) + vint(7, 1))
    # A2: more than 2 GiB - 1 of protobuf (sparse, so it costs no disk).
    add("a2_over_2gib", "A2", "model file of 2 GiB (sparse zeros), over the 2 GiB - 1 protobuf limit",
        "E0103", 3, setup=["sparse:a2_over_2gib.onnx:2147483648"])


def nested_if_bytes(levels):
    """Graph bytes of `levels` If nodes, each holding the next in then_branch."""
    g = b""
    for _ in range(levels):
        attr = ld(1, "then_branch") + ld(6, g) + vint(20, 5)
        g = ld(1, ld(4, "If") + ld(5, attr))
    return g


def nesting_cases():
    header = vint(1, 8) + ld(8, ld(1, "") + vint(2, 17))
    add("a3_nested_if_10000_messages", "A3",
        "If nodes nested 3,334 deep through then_branch: 10,000 nested messages in 53 KB",
        "E0104", 3, header + ld(7, nested_if_bytes(3334)))
    # TypeProto.sequence_type.elem_type chain, 10,000 messages deep.
    t = ld(1, vint(1, 1))  # tensor_type { elem_type: FLOAT }
    for _ in range(5000):
        t = ld(4, ld(1, t))  # sequence_type { elem_type { ... } }
    vinfo = ld(1, "x") + ld(2, t)
    add("a3_nested_sequence_type_10000", "A3",
        "graph input of type sequence(sequence(...)) nested 10,000 messages deep", "E0104", 3,
        header + ld(7, ld(2, "main") + ld(11, vinfo)))
    group = tag(99, 3) * 200 + tag(99, 4) * 200
    add("a3_nested_groups_200", "A3", "unknown field of 200 nested start-groups (proto2 groups)",
        "E0104", 3, header + ld(7, ld(2, "main") + group))
    add("a3_graph_depth_33", "A3",
        "33 graph levels of If (parses within the 100-message limit; over the 32-graph limit)",
        "E0104", 3, deep_if_model(33))


def deep_if_model(depth, undefined_at_bottom=False):
    """A well-formed chain of If nodes `depth` graphs deep (main graph = 1)."""
    cond = helper.make_tensor("c", TensorProto.BOOL, [], [True])

    def body(level):
        out = f"y{level}"
        if level == depth:
            src = "nowhere" if undefined_at_bottom else "x"
            nodes = [helper.make_node("Identity", [src], [out], name=f"id{level}")]
        else:
            other = graph([helper.make_node("Identity", ["x"], [f"e{level}"], name=f"else{level}")], [],
                          [vi(f"e{level}")], name=f"else{level}")
            nodes = [helper.make_node("If", ["c"], [out], name=f"if{level}", then_branch=body(level + 1),
                                      else_branch=other)]
        if level == 1:
            return graph(nodes, [vi("x")], [vi(out)], [cond])
        return graph(nodes, [], [vi(out)], name=f"level{level}")

    return model(body(1))


def a4_setup(path, nodes):
    """5 M empty NodeProto (2 bytes each) in one graph: built by the test."""
    graph_len = 2 * nodes
    prefix = vint(1, 8) + ld(8, ld(1, "") + vint(2, 17)) + tag(7, 2) + varint(graph_len)
    return f"repeat:{path}:{prefix.hex()}:0a00:{nodes}:"


def resource_cases():
    add("a4_5m_empty_nodes", "A4",
        "5,000,000 empty NodeProto in a 10 MB file (~95x memory amplification in protobuf)",
        "E0105", 3, setup=[a4_setup("a4_5m_empty_nodes.onnx", 5_000_000)])
    add("a5_sparse_50gb", "A5", "a 50 GB sparse model file", "E0103", 3,
        setup=["sparse:a5_sparse_50gb.onnx:53687091200"])
    add("a5_symlink_to_dev_zero", "A5", "model path is a symlink to /dev/zero", "E0100", 3,
        setup=["symlink:a5_symlink_to_dev_zero.onnx->/dev/zero"])
    add("a5_fifo_model", "A5", "model path is a FIFO with no writer (must not block)", "E0100", 3,
        setup=["fifo:a5_fifo_model.onnx"])
    add("a5_directory_model", "A5", "model path is a directory", "E0100", 3,
        setup=["dir:a5_directory_model.onnx"])
    add("a5_missing_model", "A5", "model path does not exist", "E0100", 3)
    add("a5_socket_model", "A5", "model path is a unix socket", "E0100", 3,
        setup=["socket:a5_socket_model.onnx"])


def placeholder_swap(data, pairs):
    """Replaces same-length ASCII placeholders by raw bytes (invalid UTF-8...)."""
    for old, new in pairs:
        assert len(old) == len(new) and old in data, old
        data = data.replace(old, new)
    return data


def encoding_cases():
    m = model(graph([helper.make_node("Relu", ["QQQQx"], ["y"], name="QQQQnode")], [vi("x")], [vi("y")]))
    add("a6_invalid_utf8_names", "A6",
        "node name and input name hold invalid UTF-8 (\\xff\\xfe\\xc3\\x28); the input is undefined; "
        "the JSON report must stay valid UTF-8", "E0304", 1,
        placeholder_swap(ser(m), [(b"QQQQx", b"\xff\xfe\xc3\x28x"), (b"QQQQnode", b"\xff\xfe\xc3\x28node")]))
    m = model(graph([helper.make_node("Relu", ["x\n\x1b[31m\"\\\u2028\x00", ], ["y"], name="r\r\t")],
                    [vi("x")], [vi("y")]))
    add("a6_control_chars_in_names", "A6",
        "undefined input named with newline, ANSI escape, quote, backslash, U+2028 and NUL", "E0304", 1, m)
    # Unknown fields of every wire type at model, graph, node and tensor level.
    unknown = vint(1000, 1) + ld(1001, "x") + tag(1002, 5) + b"\0\0\0\0" + tag(1003, 1) + b"\0" * 8 + \
        tag(1004, 3) + vint(1, 1) + tag(1004, 4)
    node = ld(1, "x") + ld(2, "t") + ld(4, "Relu") + unknown
    g = ld(1, node) + ld(2, "main") + ld(11, ser(vi("x"))) + ld(12, ser(vi("y"))) + unknown
    add("a6_unknown_fields", "A6",
        "unknown fields of every wire type at model, graph and node level; output y is never produced",
        "E0305", 1, vint(1, 8) + ld(8, ld(1, "") + vint(2, 17)) + ld(7, g) + unknown)
    attr = ld(1, "axis") + vint(3, 0) + vint(20, 99)  # type 99: not an AttributeType
    node = ld(1, "x") + ld(1, "x") + ld(2, "y") + ld(4, "Concat") + ld(5, attr)
    g = ld(1, node) + ld(2, "main") + ld(11, ser(vi("x"))) + ld(12, ser(vi("y", shape=(2,))))
    add("a6_unknown_attribute_type_enum", "A6",
        "Concat axis with attribute type 99 (unknown enum value, kept as an unknown field)", "E0405", 1,
        vint(1, 8) + ld(8, ld(1, "") + vint(2, 17)) + ld(7, g))


def duplicate_field_cases():
    header = vint(1, 8) + ld(8, ld(1, "") + vint(2, 17))
    g1 = graph([helper.make_node("Relu", ["x"], ["y"], name="a")], [vi("x")], [vi("y")])
    g2 = graph([helper.make_node("Neg", ["x"], ["y"], name="b")], [], [])
    g2.ClearField("name")
    add("a7_graph_field_twice", "A7",
        "the graph field appears twice; proto2 merges them, so y is produced by two nodes "
        "(a parser keeping only the last graph would see a valid model)", "E0300", 1,
        header + ld(7, ser(g1)) + ld(7, ser(g2)))
    body = ser(relu_model())
    add("a7_ir_version_twice", "A7", "ir_version 8 then -1: the last value wins", "E0200", 1,
        body + vint(1, -1))
    add("a7_opset_version_twice", "A7", "opset_import version 17 then 2^40 in one entry (last wins)",
        "E0202", 1, vint(1, 8) + ld(8, ld(1, "") + vint(2, 17) + vint(2, 1 << 40)) +
        ld(7, ser(relu_model().graph)))
    t = float_init("w", [1], raw=b"\0\0\0\0")
    tb = ser(t) + vint(2, 0)  # data_type FLOAT, then UNDEFINED
    g = ld(1, ser(helper.make_node("Add", ["x", "w"], ["y"], name="add"))) + ld(2, "main") + ld(5, tb) + \
        ld(11, ser(vi("x"))) + ld(12, ser(vi("y")))
    add("a7_data_type_twice", "A7", "initializer data_type FLOAT then UNDEFINED (last wins)", "E0500", 1,
        header + ld(7, g))


# --- B. Model and graph structure -----------------------------------------


def model_cases():
    m = relu_model()
    m.ir_version = 0
    data = ser(m)  # proto2 writes an explicitly set 0
    assert data.startswith(b"\x08\x00")
    add("b1_ir_version_zero", "B1", "ir_version explicitly 0", "E0200", 1, data)
    m = relu_model()
    m.ClearField("ir_version")
    add("b1_ir_version_missing", "B1", "no ir_version field", "E0200", 1, m)
    add("b1_ir_version_negative", "B1", "ir_version -1 (10-byte varint)", "E0200", 1, relu_model(ir=-1))
    add("b1_ir_version_too_new", "B1", "ir_version 1000", "E0200", 1, relu_model(ir=1000))
    add("b2_default_domain_not_imported", "B2", "nodes use the default domain, only com.example is imported",
        "E0204", 1, relu_model(opsets=[opset("com.example", 1)]))
    add("b2_no_opset_import", "B2", "opset_import is empty", "E0201", 1, relu_model(opsets=[]))
    add("b3_opset_2pow40", "B3", "default opset version 2^40 (truncates to 0 as int32)", "E0202", 1,
        relu_model(opsets=[opset("", 1 << 40)]))
    add("b3_opset_negative", "B3", "default opset version -1", "E0202", 1, relu_model(opsets=[opset("", -1)]))
    add("b3_opset_too_new", "B3", "default opset version 29 (onnxkit knows up to 28)", "E0202", 1,
        relu_model(opsets=[opset("", 29)]))
    add("b3_opset_imported_twice", "B3", "default domain imported as 17 and as 13", "E0203", 1,
        relu_model(opsets=[opset("", 17), opset("", 13)]))
    m = relu_model()
    for v in ("a", "b"):
        e = m.metadata_props.add()
        e.key = "k"
        e.value = v
    add("b1_metadata_key_twice", "B1", "metadata_props key 'k' appears twice", "E0205", 1, m)


def graph_cases():
    x, y = vi("x"), vi("y")
    n = helper.make_node
    add("b4_cycle", "B4", "two nodes feed each other: a -> b -> a", "E0303", 1,
        model(graph([n("Add", ["x", "b"], ["a"], name="n1"), n("Relu", ["a"], ["b"], name="n2"),
                     n("Identity", ["b"], ["y"], name="n3")], [x], [y])))
    add("b4_self_loop", "B4", "a node consumes its own output", "E0303", 1,
        model(graph([n("Add", ["x", "t"], ["t"], name="n1"), n("Identity", ["t"], ["y"], name="n2")], [x], [y])))
    add("b4_use_before_definition", "B4", "node 0 reads t, produced by node 1 (acyclic, not sorted)", "E0302", 1,
        model(graph([n("Relu", ["t"], ["y"], name="late"), n("Neg", ["x"], ["t"], name="early")], [x], [y])))
    add("b4_undefined_input", "B4", "a node reads a value defined nowhere", "E0304", 1,
        model(graph([n("Add", ["x", "ghost"], ["y"], name="add")], [x], [y])))
    add("b5_output_produced_twice", "B5", "two nodes produce y", "E0300", 1,
        model(graph([n("Relu", ["x"], ["y"], name="a"), n("Neg", ["x"], ["y"], name="b")], [x], [y])))
    add("b5_output_shadows_graph_input", "B5", "a node output is named like the graph input", "E0300", 1,
        model(graph([n("Relu", ["x"], ["x"], name="a"), n("Neg", ["x"], ["y"], name="b")], [x], [y])))
    add("b5_output_shadows_initializer", "B5", "a node output is named like an initializer", "E0300", 1,
        model(graph([n("Relu", ["x"], ["w"], name="a"), n("Add", ["x", "w"], ["y"], name="b")], [x], [y],
                    [float_init("w", [1], floats=[1.0])])))
    add("b5_same_output_twice_on_one_node", "B5", "a Split node lists output y twice", "E0300", 1,
        model(graph([n("Split", ["x"], ["y", "y"], name="s", axis=0, num_outputs=2)], [vi("x", shape=(2,))], [y]),
              opsets=[opset("", 18)]))
    inner = graph([n("Relu", ["x"], ["x"], name="inner")], [], [vi("x")], name="then")
    add("b5_subgraph_shadows_outer_name", "B5", "an If branch redefines outer value x", "E0301", 1,
        model(graph([n("If", ["c"], ["y"], name="if", then_branch=inner, else_branch=inner)],
                    [x, vi("c", TensorProto.BOOL, ())], [y])))
    add("b6_duplicate_graph_input", "B6", "graph input x listed twice", "E0306", 1,
        model(graph([n("Relu", ["x"], ["y"], name="r")], [x, vi("x")], [y])))
    w = float_init("w", [1], floats=[1.0])
    add("b6_duplicate_initializer", "B6", "initializer w listed twice", "E0307", 1,
        model(graph([n("Add", ["x", "w"], ["y"], name="a")], [x], [y], [w, w])))
    add("b6_empty_initializer_name", "B6", "an initializer with an empty name", "E0308", 1,
        model(graph([n("Relu", ["x"], ["y"], name="r")], [x], [y], [float_init("", [1], floats=[1.0])])))
    add("b6_empty_input_name", "B6", "a graph input with an empty name", "E0308", 1,
        model(graph([n("Relu", ["x"], ["y"], name="r")], [x, vi("")], [y])))
    sp = helper.make_sparse_tensor(float_init("w", [1], floats=[1.0]),
                                   helper.make_tensor("w_idx", TensorProto.INT64, [1], [0]), [4])
    add("b6_sparse_dense_name_clash", "B6", "a dense and a sparse initializer are both named w", "E0307", 1,
        model(graph([n("Add", ["x", "w"], ["y"], name="a")], [vi("x", shape=(4,))], [vi("y", shape=(4,))],
                    [float_init("w", [4], floats=[1, 2, 3, 4])], sparse=[sp])))
    add("b7_output_not_produced", "B7", "graph output z is produced by nothing", "E0305", 1,
        model(graph([n("Relu", ["x"], ["y"], name="r")], [x], [y, vi("z")])))


def node_cases():
    x, y = vi("x"), vi("y")
    n = helper.make_node

    def single(node, inputs=(x,), outputs=(y,), opsets=None, inits=()):
        return model(graph([node], list(inputs), list(outputs), list(inits)), opsets=opsets)

    add("b8_unknown_op", "B8", "op NoSuchOp in ai.onnx", "E0400", 1, single(n("NoSuchOp", ["x"], ["y"], name="o")))
    add("b8_op_newer_than_opset", "B8", "Gelu (opset 20) in an opset-17 model", "E0400", 1,
        single(n("Gelu", ["x"], ["y"], name="g")))
    add("b8_deprecated_op", "B8", "Upsample, deprecated since opset 10, at opset 17", "E0401", 1,
        single(n("Upsample", ["x", "s"], ["y"], name="u"), inputs=(vi("x", shape=(1, 1, 2, 2)), vi("s", shape=(4,))),
               outputs=(vi("y", shape=(1, 1, 4, 4)),)))
    add("b8_too_many_inputs", "B8", "Relu with two inputs", "E0402", 1, single(n("Relu", ["x", "x"], ["y"], name="r")))
    add("b8_too_few_inputs", "B8", "Add with one input", "E0402", 1, single(n("Add", ["x"], ["y"], name="a")))
    add("b8_empty_required_input", "B8", "Add whose first (required) input name is empty", "E0402", 1,
        single(n("Add", ["", "x"], ["y"], name="a")))
    add("b8_too_many_outputs", "B8", "Relu with two outputs", "E0403", 1,
        single(n("Relu", ["x"], ["y", "z"], name="r"), outputs=(y, vi("z"))))
    add("b9_attribute_wrong_type", "B9", "Concat axis given as a FLOAT attribute", "E0405", 1,
        single(n("Concat", ["x", "x"], ["y"], name="c", axis=0.0), outputs=(vi("y", shape=(2,)),)))
    attr = helper.make_attribute("axis", 0)
    attr.f = 1.5  # an INT attribute carrying a float value too
    node = n("Concat", ["x", "x"], ["y"], name="c")
    node.attribute.append(attr)
    add("b9_attribute_two_values", "B9", "Concat axis of type INT with both i and f set", "E0405", 1,
        single(node, outputs=(vi("y", shape=(2,)),)))
    node = n("Concat", ["x", "x"], ["y"], name="c", axis=0)
    node.attribute.append(helper.make_attribute("axis", 0))
    add("b9_duplicate_attribute", "B9", "Concat lists attribute axis twice", "E0407", 1,
        single(node, outputs=(vi("y", shape=(2,)),)))
    add("b9_missing_required_attribute", "B9", "Concat without its required axis", "E0406", 1,
        single(n("Concat", ["x", "x"], ["y"], name="c"), outputs=(vi("y", shape=(2,)),)))
    add("b9_unknown_attribute", "B9", "Relu with attribute 'payload' its schema does not define", "E0404", 1,
        single(n("Relu", ["x"], ["y"], name="r", payload=1)))
    branch = graph([n("Identity", ["x"], ["y1"], name="i")], [], [vi("y1")], name="b")
    node = n("If", ["c"], ["y"], name="if", else_branch=branch)
    a = node.attribute.add()
    a.name = "then_branch"
    a.type = onnx.AttributeProto.GRAPH  # but no g
    add("b9_graph_attribute_without_g", "B9", "If then_branch of type GRAPH with no g", "E0405", 1,
        single(node, inputs=(x, vi("c", TensorProto.BOOL, ()))))
    add("b12_custom_op_strict", "B12", "op com.evil::Pwn with --strict-custom", "E0409", 1,
        single(n("Pwn", ["x"], ["y"], name="p", domain="com.evil"), opsets=[opset(), opset("com.evil", 1)]),
        flags=["--strict-custom"])
    add("b12_ort_internal_domain_werror", "B12", "op com.microsoft::FusedGemm with --werror", "E0409", 1,
        single(n("FusedGemm", ["x", "x"], ["y"], name="f", domain="com.microsoft"),
               opsets=[opset(), opset("com.microsoft", 1)]), flags=["--werror"])
    add("b12_custom_domain_not_imported", "B12", "op com.evil::Pwn whose domain is not imported", "E0204", 1,
        single(n("Pwn", ["x"], ["y"], name="p", domain="com.evil")))
    m = relu_model()
    m.ClearField("graph")
    add("b13_no_graph", "B13", "ir_version and opset_import, no graph", "E0209", 1, m)
    add("b13_empty_node", "B13", "a node with no op_type, inputs or outputs", "E0410", 1,
        model(graph([n("Relu", ["x"], ["y"], name="r"), onnx.NodeProto()], [x], [y])))
    add("b13_empty_op_type", "B13", "a node with inputs and outputs but an empty op_type", "E0410", 1,
        single(n("", ["x"], ["y"], name="blank")))
    m = relu_model()
    m.graph.name = ""
    add("b13_empty_graph_name", "B13", "the main graph has no name (a warning; an error with --werror)",
        "E0310", 1, m, flags=["--werror"])


def function_cases():
    n = helper.make_node
    local = opset("local", 1)

    def fn(name, body_op, body_domain="local"):
        return helper.make_function("local", name, ["x"], ["y"],
                                    [n(body_op, ["x"], ["y"], domain=body_domain)], [opset(), local])

    def caller(functions, op="f"):
        return model(graph([n(op, ["x"], ["y"], name="call", domain="local")], [vi("x")], [vi("y")]),
                     opsets=[opset(), local], functions=functions)

    add("b10_function_calls_itself", "B10", "model-local function f calls f", "E0207", 1, caller([fn("f", "f")]))
    add("b10_mutual_recursion", "B10", "f calls g, g calls f", "E0207", 1, caller([fn("f", "g"), fn("g", "f")]))
    branch = graph([n("f", ["x"], ["y1"], domain="local")], [], [vi("y1")], name="then")
    body = [n("Constant", [], ["c"], value=helper.make_tensor("cv", TensorProto.BOOL, [], [True])),
            n("If", ["c"], ["y"], then_branch=branch, else_branch=branch)]
    f = helper.make_function("local", "f", ["x"], ["y"], body, [opset(), local])
    add("b10_recursion_inside_if_body", "B10", "f calls itself from inside an If branch of its body", "E0207", 1,
        caller([f]))
    chain = [fn(f"f{i}", f"f{i + 1}") for i in range(70)] + [fn("f70", "Relu", "")]
    add("b10_function_call_depth_71", "B10", "a chain f0 -> f1 -> ... -> f70 (no recursion, depth over 64)",
        "E0208", 3, caller(chain, "f0"))
    # 20,000 copies of one function: uniqueness must not be quadratic. Built
    # at test time (~1 MB).
    m = caller([])
    unit = ld(25, ser(fn("f", "Relu", "")))
    add("b10_20000_duplicate_functions", "B10", "20,000 model-local functions all named local::f", "E0206", 1,
        setup=[f"repeat:b10_20000_duplicate_functions.onnx:{ser(m).hex()}:{unit.hex()}:20000:"])
    add("b11_if_chain_31_deep", "B11",
        "If nodes nested 31 graphs deep, every level reading outer-scope x and c (scope lookups must "
        "not be quadratic or exponential); the innermost reads an undefined value", "E0304", 1,
        deep_if_model(31, True))
    add("b11_if_chain_20_deep", "B11", "the nested-If PoC: 20 levels, innermost input undefined", "E0304", 1,
        deep_if_model(20, True))


# --- C. Tensors and initializers ------------------------------------------


def tensor_cases():
    n = helper.make_node
    add("c1_dims_product_overflow", "C1", "initializer dims [2^62, 2^62]: the element count overflows int64",
        "E0501", 1, init_model(float_init("w", [1 << 62, 1 << 62], raw=b"\0" * 4)))
    add("c1_dims_int64_max_times_2", "C1", "dims [INT64_MAX, 2]", "E0501", 1,
        init_model(float_init("w", [(1 << 63) - 1, 2], raw=b"\0" * 4)))
    add("c1_byte_size_overflow", "C1", "FLOAT dims [2^62]: the count fits int64, the byte size does not; "
        "4 bytes of data", "E0502", 1, init_model(float_init("w", [1 << 62], raw=b"\0" * 4)))
    add("c2_negative_dim", "C2", "initializer dims [-1, 4]", "E0501", 1,
        init_model(float_init("w", [-1, 4], floats=[1, 2, 3, 4])))
    add("c2_int64_min_dim", "C2", "initializer dims [INT64_MIN]", "E0501", 1,
        init_model(float_init("w", [-(1 << 63)], raw=b"")))
    add("c3_raw_data_short", "C3", "FLOAT[1000000] with 4 bytes of raw_data", "E0502", 1,
        init_model(float_init("w", [1000000], raw=b"\0" * 4)))
    add("c3_float_data_short", "C3", "FLOAT[1000000] with 2 float_data values", "E0502", 1,
        init_model(float_init("w", [1000000], floats=[1, 2])))
    cv = float_init("cv", [1000000], raw=b"\0" * 4)
    add("c3_constant_value_short", "C3", "Constant value FLOAT[1000000] with 4 bytes of data", "E0502", 1,
        model(graph([n("Constant", [], ["c"], name="k", value=cv), n("Add", ["x", "c"], ["y"], name="a")],
                    [vi("x")], [vi("y")])))
    add("c4_raw_data_not_multiple", "C4", "FLOAT[2] with 7 bytes of raw_data", "E0502", 1,
        init_model(float_init("w", [2], raw=b"\0" * 7)))
    add("c4_double_raw_data_odd", "C4", "DOUBLE[1] with 9 bytes of raw_data", "E0502", 1,
        model(graph([n("Identity", ["w"], ["y"], name="i")], [], [vi("y", TensorProto.DOUBLE)],
                    [TensorProto(name="w", data_type=TensorProto.DOUBLE, dims=[1], raw_data=b"\0" * 9)])))
    s = TensorProto(name="s", data_type=TensorProto.STRING, dims=[1000000000])
    add("c5_string_1e9_no_data", "C5", "STRING[1e9] with no string_data (32 GB of std::string if trusted)",
        "E0502", 1, model(graph([n("Identity", ["s"], ["y"], name="i")], [], [vi("y", TensorProto.STRING)], [s])))
    s = TensorProto(name="s", data_type=TensorProto.STRING, dims=[1000000000], string_data=[b"x"])
    add("c5_string_1e9_one_value", "C5", "STRING[1e9] with one string_data value", "E0502", 1,
        model(graph([n("Identity", ["s"], ["y"], name="i")], [], [vi("y", TensorProto.STRING)], [s])))
    for label, dt in (("undefined", 0), ("9999", 9999), ("negative", -5)):
        t = TensorProto(name="w", data_type=dt, dims=[1], raw_data=b"\0" * 4)
        add(f"c6_data_type_{label}", "C6", f"initializer data_type {dt}", "E0500", 1, init_model(t))
    add("c6_input_elem_type_9999", "C6", "graph input of tensor type with elem_type 9999", "E0309", 1,
        model(graph([n("Relu", ["x"], ["y"], name="r")], [vi("x", 9999)], [vi("y")])))
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], int64_data=[1, 2])
    add("c7_float_in_int64_data", "C7", "FLOAT[2] stored in int64_data", "E0503", 1, init_model(t))
    t = TensorProto(name="s", data_type=TensorProto.STRING, dims=[1], raw_data=b"abcd")
    add("c7_string_in_raw_data", "C7", "STRING[1] stored in raw_data", "E0503", 1,
        model(graph([n("Identity", ["s"], ["y"], name="i")], [], [vi("y", TensorProto.STRING)], [t])))
    add("c7_two_data_fields", "C7", "FLOAT[2] with both raw_data and float_data", "E0503", 1,
        init_model(float_init("w", [2], raw=b"\0" * 8, floats=[1, 2]), [vi("x", shape=(2,))]))
    add("c7_empty_tensor_with_data", "C7", "FLOAT[0] carrying one float_data value", "E0502", 1,
        init_model(float_init("w", [0], floats=[1.0])))
    sparse_cases()
    packed_cases()


def sparse_model(dims, values, indices, idx_type=TensorProto.INT64, idx_dims=None):
    vals = float_init("sp", [len(values)], floats=values)
    if idx_type == TensorProto.INT64:
        idx = TensorProto(name="sp_idx", data_type=idx_type, dims=idx_dims or [len(indices)], int64_data=indices)
    else:
        idx = TensorProto(name="sp_idx", data_type=idx_type, dims=idx_dims or [len(indices)], int32_data=indices)
    sp = onnx.SparseTensorProto()
    sp.values.CopyFrom(vals)
    sp.indices.CopyFrom(idx)
    sp.dims.extend(dims)
    node = helper.make_node("Identity", ["sp"], ["y"], name="i")
    return model(graph([node], [], [vi("y", shape=list(dims))], sparse=[sp]))


def sparse_cases():
    add("c8_sparse_index_out_of_range", "C8", "sparse FLOAT[10] with index 100", "E0504", 1,
        sparse_model([10], [1, 2], [3, 100]))
    add("c8_sparse_negative_index", "C8", "sparse FLOAT[10] with index -1", "E0504", 1,
        sparse_model([10], [1, 2], [-1, 2]))
    add("c8_sparse_unsorted", "C8", "sparse indices [5, 3]", "E0504", 1, sparse_model([10], [1, 2], [5, 3]))
    add("c8_sparse_duplicate_index", "C8", "sparse indices [3, 3]", "E0504", 1, sparse_model([10], [1, 2], [3, 3]))
    add("c8_sparse_indices_int32", "C8", "sparse indices of type INT32", "E0504", 1,
        sparse_model([10], [1, 2], [1, 2], TensorProto.INT32))
    add("c8_sparse_nnz_mismatch", "C8", "2 values, 3 indices", "E0504", 1, sparse_model([10], [1, 2], [1, 2, 3]))
    add("c8_sparse_indices_wrong_rank", "C8", "rank-2 dense shape, indices of shape [2, 3]", "E0504", 1,
        sparse_model([2, 2], [1, 2], [0, 0, 0, 1, 1, 1], idx_dims=[2, 3]))
    add("c9_sparse_dims_overflow", "C9", "sparse dims [2^40, 2^40] with rank-1 indices (unchecked multiply upstream)",
        "E0501", 1, sparse_model([1 << 40, 1 << 40], [1, 2], [1, 2]))
    add("c9_sparse_negative_dims", "C9", "sparse dims [-4]", "E0501", 1, sparse_model([-4], [1], [0]))


def packed_cases():
    n = helper.make_node
    for label, dt, count, nbytes in (("int4", 22, 10, 4), ("uint4", 21, 9, 4), ("float4e2m1", 23, 8, 3),
                                     ("int2", 26, 9, 2), ("uint2", 25, 12, 2)):
        t = TensorProto(name="w", data_type=dt, dims=[count], raw_data=b"\0" * nbytes)
        m = model(graph([n("Identity", ["w"], ["y"], name="i")], [], [vi("y", dt, (count,))], [t]),
                  opsets=[opset("", 25)], ir=11)
        add(f"c10_{label}_short", "C10", f"{label.upper()}[{count}] with {nbytes} bytes of packed raw_data",
            "E0502", 1, m)


def map_type(key_type, value_type):
    t = onnx.TypeProto()
    t.map_type.key_type = key_type
    t.map_type.value_type.CopyFrom(value_type)
    return t


def typed_input(name, type_proto):
    v = onnx.ValueInfoProto(name=name)
    v.type.CopyFrom(type_proto)
    return v


def shape_tensor_cases():
    n = helper.make_node
    w = float_init("w", [4, 5], raw=b"\0" * 80)
    add("c11_gemm_initializer_mismatch", "C11", "Gemm A[2,3] with B initializer [4,5]", "E0601", 1,
        model(graph([n("Gemm", ["a", "w"], ["y"], name="gemm")], [vi("a", shape=(2, 3))],
                    [yr(2)], [w])), flags=FULL)
    add("c11_matmul_initializer_mismatch", "C11", "MatMul x[2,3] by initializer [4,5]", "E0601", 1,
        model(graph([n("MatMul", ["a", "w"], ["y"], name="mm")], [vi("a", shape=(2, 3))],
                    [yr(2)], [w])), flags=FULL)
    cw = float_init("w", [4, 2, 3, 3], raw=b"\0" * 4 * 72)
    add("c11_conv_weight_channels", "C11", "Conv X[1,3,8,8] with W[4,2,3,3] (2 input channels, group 1)",
        "E0601", 1, model(graph([n("Conv", ["x", "w"], ["y"], name="conv")], [vi("x", shape=(1, 3, 8, 8))],
                                [yr(4)], [cw])), flags=FULL)
    f = helper.make_tensor_type_proto(TensorProto.FLOAT, [1])
    add("c12_map_float_key", "C12", "graph input of type map(float, tensor(float)): float keys are not allowed",
        "E0309", 1, model(graph([n("Identity", ["m"], ["y"], name="i")],
                                [typed_input("m", map_type(TensorProto.FLOAT, f))],
                                [typed_input("y", map_type(TensorProto.FLOAT, f))])))
    t = onnx.TypeProto()
    t.sequence_type.SetInParent()
    add("c12_sequence_without_elem_type", "C12", "graph input of type sequence with no element type", "E0309", 1,
        model(graph([n("Identity", ["s"], ["y"], name="i")], [typed_input("s", t)], [typed_input("y", t)])))
    t = onnx.TypeProto()
    t.map_type.key_type = TensorProto.INT64
    add("c12_map_without_value_type", "C12", "graph input of type map(int64, ?) with no value type", "E0309", 1,
        model(graph([n("Identity", ["m"], ["y"], name="i")], [typed_input("m", t)], [typed_input("y", t)])))
    t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(9999, [1]))
    add("c12_sequence_of_unknown_type", "C12", "sequence(tensor(elem_type 9999))", "E0309", 1,
        model(graph([n("Identity", ["s"], ["y"], name="i")], [typed_input("s", t)], [typed_input("y", t)])))


# --- D. External data -----------------------------------------------------


def ext_model(location=None, dims=(4,), entries=None, data_type=TensorProto.FLOAT):
    """x + w, with w stored externally."""
    if entries is None:
        entries = [("location", location)]
    t = external_tensor("w", dims, entries, data_type)
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    return model(graph([node], [vi("x", shape=dims)], [vi("y", shape=dims)], [t]))


W16 = {"w.bin": b"\0" * 16}


def ext(name, cls, description, code, exit_code, m, files=None, setup=()):
    add(name, cls, description, code, exit_code, m, folder=True, extra_files=files, setup=setup)


def location_cases():
    ext("d1_dotdot_etc_passwd", "D1", "location ../../etc/passwd", "E0506", 3, ext_model("../../etc/passwd"))
    ext("d1_dotdot_many", "D1", "location ../../../../../../../../etc/passwd", "E0506", 3,
        ext_model("../" * 8 + "etc/passwd"))
    ext("d2_sub_dotdot_dotdot", "D2", "location sub/../../secret (normalizes outside)", "E0506", 3,
        ext_model("sub/../../secret"), setup=["file:secret:16", "dir:d2_sub_dotdot_dotdot/sub"])
    ext("d2_dot_dotdot", "D2", "location ./../x", "E0506", 3, ext_model("./../x"), setup=["file:x:16"])
    ext("d2_dotdot_back_inside", "D2", "location sub/../w.bin (normalizes inside, still has '..')", "E0506", 3,
        ext_model("sub/../w.bin"), files=W16, setup=["dir:d2_dotdot_back_inside/sub"])
    ext("d3_absolute_path", "D3", "location /etc/shadow", "E0506", 3, ext_model("/etc/shadow"))
    ext("d3_windows_drive", "D3", "location C:\\Windows\\win.ini", "E0506", 3, ext_model("C:\\Windows\\win.ini"))
    ext("d3_windows_drive_relative", "D3", "location C:w.bin (drive-relative)", "E0506", 3, ext_model("C:w.bin"))
    ext("d3_unc_path", "D3", "location \\\\server\\share\\w.bin", "E0506", 3, ext_model("\\\\server\\share\\w.bin"))
    ext("d4_symlink_to_outside", "D4", "w.bin is a symlink to a file outside the model folder", "E0506", 3,
        ext_model("w.bin"), setup=["file:secret.bin:16", "symlink:d4_symlink_to_outside/w.bin->../secret.bin"])
    ext("d4_symlink_to_etc_passwd", "D4", "w.bin is a symlink to /etc/passwd", "E0506", 3, ext_model("w.bin"),
        setup=["symlink:d4_symlink_to_etc_passwd/w.bin->/etc/passwd"])
    ext("d4_symlink_inside_folder", "D4", "w.bin is a symlink to real.bin in the same folder", "E0506", 3,
        ext_model("w.bin"), files={"real.bin": b"\0" * 16},
        setup=["symlink:d4_symlink_inside_folder/w.bin->real.bin"])
    ext("d5_symlinked_parent_dir", "D5", "location link/w.bin where link is a symlink to a folder outside",
        "E0506", 3, ext_model("link/w.bin"),
        setup=["dir:outside", "file:outside/w.bin:16", "symlink:d5_symlinked_parent_dir/link->../outside"])
    ext("d6_hardlink_to_secret", "D6", "w.bin is a hard link to a file outside the model folder", "E0506", 3,
        ext_model("w.bin"), setup=["file:secret.bin:16", "hardlink:d6_hardlink_to_secret/w.bin->secret.bin"])
    ext("d7_swapped_symlink", "D7",
        "the state after a check-then-open race swapped w.bin for a symlink (the race itself is not "
        "reproducible here; lib/io opens with O_NOFOLLOW component by component)", "E0506", 3,
        ext_model("w.bin"), setup=["file:secret.bin:16", "symlink:d7_swapped_symlink/w.bin->../secret.bin"])
    ext("d8_location_is_directory", "D8", "location names a folder", "E0506", 3, ext_model("wdir"),
        setup=["dir:d8_location_is_directory/wdir"])
    ext("d8_location_is_fifo", "D8", "location names a FIFO with no writer (must not block)", "E0506", 3,
        ext_model("w.bin"), setup=["fifo:d8_location_is_fifo/w.bin"])
    ext("d8_location_is_socket", "D8", "location names a unix socket", "E0506", 3, ext_model("w.bin"),
        setup=["socket:d8_location_is_socket/w.bin"])
    ext("d8_location_is_device", "D8", "location names a symlink to /dev/zero", "E0506", 3, ext_model("w.bin"),
        setup=["symlink:d8_location_is_device/w.bin->/dev/zero"])


def range_cases():
    def e(loc="w.bin", offset=None, length=None, extra=()):
        out = [("location", loc)]
        if offset is not None:
            out.append(("offset", offset))
        if length is not None:
            out.append(("length", length))
        return out + list(extra)

    ext("d9_offset_past_end", "D9", "offset 32 in a 16-byte file", "E0507", 1,
        ext_model(entries=e(offset="32", length="16")), files=W16)
    ext("d9_offset_plus_length_past_end", "D9", "offset 8 + length 16 in a 16-byte file", "E0507", 1,
        ext_model(entries=e(offset="8", length="16")), files=W16)
    ext("d10_length_1pb", "D10", "length 1 PB", "E0507", 1, ext_model(entries=e(length=str(1 << 50))), files=W16)
    ext("d10_length_negative", "D10", "length -16", "E0505", 1, ext_model(entries=e(length="-16")), files=W16)
    ext("d10_length_not_numeric", "D10", "length 'sixteen'", "E0505", 1,
        ext_model(entries=e(length="sixteen")), files=W16)
    ext("d10_offset_hex", "D10", "offset '0x10'", "E0505", 1, ext_model(entries=e(offset="0x10")), files=W16)
    ext("d10_length_over_int64", "D10", "length 99999999999999999999999 (over int64)", "E0505", 1,
        ext_model(entries=e(length="9" * 23)), files=W16)
    ext("d10_offset_plus_length_overflow", "D10", "offset INT64_MAX + length 16 overflows", "E0507", 1,
        ext_model(entries=e(offset=str((1 << 63) - 1), length="16")), files=W16)
    ext("d11_length_mismatch", "D11", "FLOAT[4] (16 bytes) with length 8", "E0507", 1,
        ext_model(entries=e(length="8")), files={"w.bin": b"\0" * 64})
    ext("d11_file_too_short", "D11", "FLOAT[100] with no length, file of 16 bytes", "E0507", 1,
        ext_model(dims=(100,), entries=e()), files=W16)
    ext("d12_unknown_key", "D12", "external_data key '__class__'", "E0505", 1,
        ext_model(entries=e(extra=[("__class__", "os.system")])), files=W16)
    ext("d12_duplicate_location", "D12", "two location keys (w.bin, then ../../etc/passwd)", "E0505", 1,
        ext_model(entries=[("location", "w.bin"), ("location", "../../etc/passwd")]), files=W16)
    ext("d12_missing_location", "D12", "external_data with offset and length but no location", "E0505", 1,
        ext_model(entries=[("offset", "0"), ("length", "16")]), files=W16)
    ext("d13_ort_mem_addr_marker", "D13", "location */_ORT_MEM_ADDR_/* with a pointer-like offset", "E0506", 3,
        ext_model(entries=[("location", "*/_ORT_MEM_ADDR_/*"), ("offset", str(0x7FFF00001000)),
                           ("length", "16")]))
    ext("d13_ort_native_endian_marker", "D13", "location */_ORT_NATIVE_ENDIAN_MEM_ADDR_/*", "E0506", 3,
        ext_model(entries=[("location", "*/_ORT_NATIVE_ENDIAN_MEM_ADDR_/*"), ("offset", "4096"),
                           ("length", "16")]))


def placement_cases():
    n = helper.make_node
    bad = [("location", "../../etc/passwd")]
    vals = external_tensor("sp", [2], bad)
    sp = onnx.SparseTensorProto()
    sp.values.CopyFrom(vals)
    sp.indices.CopyFrom(TensorProto(name="sp_idx", data_type=TensorProto.INT64, dims=[2], int64_data=[0, 1]))
    sp.dims.extend([4])
    ext("d14_sparse_values_external", "D14", "sparse initializer whose values are external ../../etc/passwd",
        "E0506", 3, model(graph([n("Identity", ["sp"], ["y"], name="i")], [], [vi("y", shape=(4,))], sparse=[sp])))
    ext("d14_constant_value_external", "D14", "Constant value tensor external at /etc/passwd", "E0506", 3,
        model(graph([n("Constant", [], ["y"], name="k", value=external_tensor("k", [4], [("location", "/etc/passwd")]))],
                    [], [vi("y", shape=(4,))])))
    sparse_attr = onnx.SparseTensorProto()
    sparse_attr.CopyFrom(sp)
    ext("d14_constant_sparse_value_external", "D14", "Constant sparse_value whose values are external ../x",
        "E0506", 3, model(graph([n("Constant", [], ["y"], name="k", sparse_value=sparse_attr)], [],
                                [vi("y", shape=(4,))])))
    body = graph([n("Identity", ["bw"], ["y1"], name="i")], [], [vi("y1", shape=(4,))],
                 [external_tensor("bw", [4], [("location", "../secret")])], name="then")
    ext("d14_subgraph_initializer_external", "D14", "an If branch initializer external at ../secret", "E0506", 3,
        model(graph([n("If", ["c"], ["y"], name="if", then_branch=body, else_branch=body)],
                    [vi("c", TensorProto.BOOL, ())], [vi("y", shape=(4,))])), setup=["file:secret:16"])
    local = opset("local", 1)
    f = helper.make_function("local", "f", ["x"], ["y"],
                             [n("Constant", [], ["k"], value=external_tensor("k", [1], [("location", "/etc/passwd")])),
                              n("Add", ["x", "k"], ["y"])], [opset(), local])
    ext("d14_function_constant_external", "D14", "a Constant inside a model-local function, external /etc/passwd",
        "E0506", 3, model(graph([n("f", ["x"], ["y"], name="call", domain="local")], [vi("x")], [vi("y")]),
                          opsets=[opset(), local], functions=[f]))
    ext("d16_nul_in_location", "D16", "location 'w.bin\\0../../etc/passwd' (a c_str() would see w.bin)", "E0506", 3,
        ext_model("w.bin\0../../etc/passwd"), files=W16)
    m = ext_model("QQQQ.bin")
    ext("d16_invalid_utf8_location", "D16", "location w\\xff\\xfe.bin (missing; the report must stay valid UTF-8)",
        "E0508", 1, placeholder_swap(ser(m), [(b"QQQQ.bin", b"w\xff\xfeQ.bin")]))
    ext("d16_dotdot_inside_filename", "D16",
        "location w..bin is a legal name (not a '..' component); its length (8) contradicts FLOAT[4]", "E0507", 1,
        ext_model(entries=[("location", "w..bin"), ("length", "8")]), files={"w..bin": b"\0" * 8})
    ext("d16_empty_location", "D16", "location ''", "E0505", 1, ext_model(""))
    # D17: the test runs onnxkit in its working folder, which holds w.bin; the
    # model's folder does not. Resolving against the CWD would find it.
    ext("d17_not_resolved_against_cwd", "D17",
        "w.bin exists in the working folder, not in the model's folder", "E0508", 1, ext_model("w.bin"),
        setup=["file:w.bin:16"])
    ext("d17_missing_data_file", "D17", "location names a file that does not exist", "E0508", 1,
        ext_model("absent.bin"))


# --- F. Shape inference and arithmetic (--full) ---------------------------


def i64(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def full(name, cls, description, nodes, inputs, outputs, inits=(), code="E0601", ops=17):
    add(name, cls, description, code, 1, model(graph(nodes, inputs, outputs, inits), opsets=[opset("", ops)]),
        flags=FULL)


def yr(rank, name="y"):
    """A graph output of known rank and unknown dims: declares nothing to conflict with."""
    return vi(name, shape=[None] * rank)


def inference_cases():
    n = helper.make_node
    x4 = vi("x", shape=(1, 3, 8, 8))
    w4 = float_init("w", [4, 3, 3, 3], raw=b"\0" * 432)
    full("f1_conv_weight_rank", "F1", "Conv X rank 4 with a rank-3 weight",
         [n("Conv", ["x", "w"], ["y"], name="conv")], [x4], [yr(4)], [float_init("w", [4, 3, 3], raw=b"\0" * 144)])
    full("f1_conv_kernel_shape_length", "F1", "2-D Conv with kernel_shape [3]",
         [n("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3])], [x4], [yr(4)], [w4])
    full("f1_pool_pads_length", "F1", "2-D MaxPool with pads [1, 1] (needs 4)",
         [n("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], pads=[1, 1])], [x4], [yr(4)])
    full("f1_pool_dilations_length", "F1", "2-D MaxPool with dilations [1, 1, 1]",
         [n("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], dilations=[1, 1, 1])], [x4], [yr(4)])
    full("f2_lstm_rank_2", "F2", "LSTM with a rank-2 X",
         [n("LSTM", ["x", "w", "r"], ["y"], name="lstm", hidden_size=2)],
         [vi("x", shape=(5, 3)), vi("w", shape=(1, 8, 3)), vi("r", shape=(1, 8, 2))], [yr(4)])
    full("f2_gru_rank_1", "F2", "GRU with a rank-1 X",
         [n("GRU", ["x", "w", "r"], ["y"], name="gru", hidden_size=2)],
         [vi("x", shape=(5,)), vi("w", shape=(1, 6, 3)), vi("r", shape=(1, 6, 2))], [yr(4)])
    full("f3_slice_step_zero", "F3", "Slice with steps [0]",
         [n("Slice", ["x", "s", "e", "a", "st"], ["y"], name="slice")], [vi("x", shape=(4,))], [yr(1)],
         [i64("s", [0]), i64("e", [4]), i64("a", [0]), i64("st", [0])])
    full("f3_slice_extreme_bounds", "F3",
         "Slice of a 0-size dim with starts INT64_MIN, ends INT64_MAX, steps -1; declared output [1, 4] "
         "conflicts with the inferred [0, 4]",
         [n("Slice", ["x", "s", "e", "a", "st"], ["y"], name="slice")], [vi("x", shape=(0, 4))],
         [vi("y", shape=(1, 4))], [i64("s", [-(1 << 63)]), i64("e", [(1 << 63) - 1]), i64("a", [0]), i64("st", [-1])],
         code="E0602")
    full("f4_split_num_outputs_mismatch", "F4", "Split num_outputs 3 with two outputs",
         [n("Split", ["x"], ["y", "z"], name="split", axis=0, num_outputs=3)], [vi("x", shape=(6,))],
         [yr(1), yr(1, "z")], ops=18)
    full("f4_split_negative_sizes", "F4", "Split sizes [-1, 5] of a dim of 4",
         [n("Split", ["x", "sz"], ["y", "z"], name="split", axis=0)], [vi("x", shape=(4,))],
         [yr(1), yr(1, "z")], [i64("sz", [-1, 5])])
    full("f5_concat_dim_overflow", "F5", "Concat of [2^62] and [2^62] and [2^62]: the sum overflows int64",
         [n("Concat", ["a", "b", "c"], ["y"], name="concat", axis=0)],
         [vi("a", shape=(1 << 62,)), vi("b", shape=(1 << 62,)), vi("c", shape=(1 << 62,))], [yr(1)])
    full("f5_tile_overflow", "F5", "Tile [2^40] by repeats [2^40]",
         [n("Tile", ["x", "r"], ["y"], name="tile")], [vi("x", shape=(1 << 40,))], [yr(1)], [i64("r", [1 << 40])])
    full("f5_conv_pads_overflow", "F5", "Conv with pads 2^62 (the padded size overflows int64)",
         [n("Conv", ["x", "w"], ["y"], name="conv", pads=[1 << 62] * 4)], [x4], [yr(4)], [w4])
    full("f5_space_to_depth_huge_blocksize", "F5", "SpaceToDepth blocksize 2^62 (blocksize^2 overflows)",
         [n("SpaceToDepth", ["x"], ["y"], name="s2d", blocksize=1 << 62)], [x4], [yr(4)])
    full("f5_reshape_int64_min", "F5", "Reshape to [-1, INT64_MIN] (INT64_MIN / -1 bait)",
         [n("Reshape", ["x", "s"], ["y"], name="reshape")], [vi("x", shape=(4,))], [yr(2)],
         [i64("s", [-1, -(1 << 63)])])
    full("f6_shape_input_2pow40_elements", "F6", "Reshape whose shape input is declared int64[2^40] (rank 2^40)",
         [n("Reshape", ["x", "s"], ["y"], name="reshape")],
         [vi("x", shape=(4,)), vi("s", TensorProto.INT64, (1 << 40,))], [yr(1)])
    full("f7_constant_of_shape_negative", "F7", "ConstantOfShape of [-5]",
         [n("ConstantOfShape", ["s"], ["y"], name="cos")], [], [yr(1)], [i64("s", [-5])])
    full("f7_constant_of_shape_huge", "F7", "ConstantOfShape of [2^62, 4] (no allocation may follow)",
         [n("ConstantOfShape", ["s"], ["y"], name="cos")], [], [yr(2)], [i64("s", [1 << 62, 4])])
    full("f7_expand_huge", "F7", "Expand x[3] to [2^62, 2^62] (3 does not broadcast to 2^62; elements overflow)",
         [n("Expand", ["x", "s"], ["y"], name="expand")], [vi("x", shape=(3,))], [yr(2)],
         [i64("s", [1 << 62, 1 << 62])])
    full("f8_einsum_malformed_equation", "F8", "Einsum equation 'ij,->->k'",
         [n("Einsum", ["a", "b"], ["y"], name="einsum", equation="ij,->->k")],
         [vi("a", shape=(2, 2)), vi("b", shape=(2, 2))], [yr(1)])
    full("f8_einsum_scalar_operand", "F8", "Einsum 'ij->i' applied to a scalar",
         [n("Einsum", ["a"], ["y"], name="einsum", equation="ij->i")], [vi("a", shape=())], [yr(1)])
    full("f8_gemm_bogus_trans", "F8", "Gemm A[2,3] B[3,4] with transB 7 (treated as set: 4x3 does not fit)",
         [n("Gemm", ["a", "b"], ["y"], name="gemm", transB=7)], [vi("a", shape=(2, 3)), vi("b", shape=(3, 4))],
         [yr(2)])
    full("f8_layer_norm_rank_0", "F8", "LayerNormalization of a scalar input",
         [n("LayerNormalization", ["x", "s"], ["y"], name="ln")], [vi("x", shape=()), vi("s", shape=(1,))], [yr(0)])
    add("f9_input_without_type", "F9", "graph input x has no type; it feeds Conv", "E0309", 1,
        model(graph([n("Conv", ["x", "w"], ["y"], name="conv")], [onnx.ValueInfoProto(name="x")], [yr(4)], [w4])),
        flags=FULL)
    add("f9_custom_op_output_into_conv", "F9",
        "an untyped custom-op output feeds Conv (inference must not dereference missing type info); "
        "the custom op is a warning, an error with --werror", "E0409", 1,
        model(graph([n("Mystery", ["x"], ["t"], name="m", domain="com.evil"), n("Conv", ["t", "w"], ["y"], name="conv")],
                    [x4], [yr(4)], [w4]), opsets=[opset(), opset("com.evil", 1)]), flags=["--full", "--werror"])
    full("f10_broadcast_zero_against_two", "F10", "Add of [0, 3] and [2, 3]",
         [n("Add", ["a", "b"], ["y"], name="add")], [vi("a", shape=(0, 3)), vi("b", shape=(2, 3))], [yr(2)])
    full("f10_shape_propagated_zero", "F10", "Reshape v[6] to Shape(x[2, 0]): 6 elements into 0",
         [n("Shape", ["x"], ["s"], name="shape"), n("Reshape", ["v", "s"], ["y"], name="reshape")],
         [vi("x", shape=(2, 0)), vi("v", shape=(6,))], [yr(2)])


def main():
    for entry in os.listdir(HERE):
        path = os.path.join(HERE, entry)
        if entry in ("gen_hostile.py",):
            continue
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    container_cases()
    nesting_cases()
    resource_cases()
    encoding_cases()
    duplicate_field_cases()
    model_cases()
    graph_cases()
    node_cases()
    function_cases()
    tensor_cases()
    shape_tensor_cases()
    location_cases()
    range_cases()
    placement_cases()
    inference_cases()
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump({"generator": "gen_hostile.py", "cases": CASES}, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"{len(CASES)} cases")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Generates the operator schema table (C++) from lib/ops/schemas.json.

Usage: gen_schema_table.py schemas.json out.inc

The output is data only, included by lib/ops/registry.cc inside
`namespace onnxkit::ops { namespace { ... } }`. It defines:

  kAllowedTypes, kTypeConstraints, kDefaultInts, kDefaultFloats,
  kDefaultStrings, kAttributes, kFormalParameters   flat pools; schemas and
                                                    attributes refer to
                                                    slices of them
  kSchemas   every OpSchema, sorted by (domain, name, since_version)
  kDomains   every domain with its highest known opset, sorted by name

Identical slices (the same allowed-type list, the same attribute list, ...)
are stored once, which keeps the table small and quick to compile. Pools
that would be empty are not emitted. The input is validated; anything the
registry cannot represent stops generation with an error. Output is
deterministic: the same input gives the same bytes.
"""

import json
import math
import os
import struct
import sys

ATTRIBUTE_TYPES = {
    "FLOAT": "pb::kAttrFloat",
    "INT": "pb::kAttrInt",
    "STRING": "pb::kAttrString",
    "TENSOR": "pb::kAttrTensor",
    "GRAPH": "pb::kAttrGraph",
    "FLOATS": "pb::kAttrFloats",
    "INTS": "pb::kAttrInts",
    "STRINGS": "pb::kAttrStrings",
    "TENSORS": "pb::kAttrTensors",
    "GRAPHS": "pb::kAttrGraphs",
    "SPARSE_TENSOR": "pb::kAttrSparseTensor",
    "SPARSE_TENSORS": "pb::kAttrSparseTensors",
    "TYPE_PROTO": "pb::kAttrTypeProto",
    "TYPE_PROTOS": "pb::kAttrTypeProtos",
}
OPTIONS = {"single": "kSingle", "optional": "kOptional", "variadic": "kVariadic"}
SUPPORT_LEVELS = {"COMMON": "kCommon", "EXPERIMENTAL": "kExperimental"}
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class GenError(Exception):
    pass


def cpp_string(s):
    """A C++ string literal for s (UTF-8), escaping anything not plain ASCII."""
    out = ['"']
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in '"\\':
            out.append("\\" + c)
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append("\\%03o" % b)
    out.append('"')
    return "".join(out)


def cpp_int64(v, what):
    if isinstance(v, bool) or not isinstance(v, int):
        raise GenError("%s: expected an integer, got %r" % (what, v))
    if v < INT64_MIN or v > INT64_MAX:
        raise GenError("%s: %d does not fit int64" % (what, v))
    if v == INT64_MIN:
        return "(-%d - 1)" % INT64_MAX
    return str(v)


def to_float32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def cpp_float(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise GenError("%s: expected a number, got %r" % (what, v))
    v = float(v)
    if math.isnan(v):
        return "std::numeric_limits<float>::quiet_NaN()"
    if math.isinf(v):
        sign = "-" if v < 0 else ""
        return sign + "std::numeric_limits<float>::infinity()"
    try:
        f = to_float32(v)
    except OverflowError:
        raise GenError("%s: %r does not fit a float" % (what, v))
    # Shortest decimal spelling that reads back as the same float.
    for digits in range(1, 10):
        text = "%.*g" % (digits, f)
        try:
            if to_float32(float(text)) == f:
                break
        except OverflowError:  # rounded up past the largest float
            continue
    if "." not in text and "e" not in text and "n" not in text:
        text += ".0"
    return text + "f"


class Pool:
    """A flat array of C++ initializers; identical slices are stored once."""

    def __init__(self, name):
        self.name = name
        self.items = []
        self.slices = {}

    def add(self, items):
        """Returns the span initializer for the slice holding `items`."""
        items = tuple(items)
        if not items:
            return "{}"
        offset = self.slices.get(items)
        if offset is None:
            offset = len(self.items)
            self.items.extend(items)
            self.slices[items] = offset
        return "{%s + %d, %d}" % (self.name, offset, len(items))

    def emit(self, out, cpp_type):
        if not self.items:
            return
        out.append("constexpr %s %s[] = {" % (cpp_type, self.name))
        for item in self.items:
            out.append("    %s," % item)
        out.append("};")
        out.append("")


def check_keys(obj, keys, what):
    missing = [k for k in keys if k not in obj]
    if missing:
        raise GenError("%s: missing field(s) %s" % (what, ", ".join(missing)))


def default_initializer(attr, pools, what):
    """AttributeDefault initializer for one attribute."""
    value = attr["default"]
    kind = attr["type"]
    if value is None:
        return "{}"
    if kind == "INT":
        return "{.kind = kInt, .i = %s}" % cpp_int64(value, what)
    if kind == "FLOAT":
        return "{.kind = kFloat, .f = %s}" % cpp_float(value, what)
    if kind == "STRING":
        if not isinstance(value, str):
            raise GenError("%s: expected a string default, got %r" % (what, value))
        return "{.kind = kString, .s = %s}" % cpp_string(value)
    if not isinstance(value, list):
        raise GenError("%s: expected a list default, got %r" % (what, value))
    if kind == "INTS":
        span = pools["ints"].add(cpp_int64(v, what) for v in value)
        return "{.kind = kInts, .ints = %s}" % span
    if kind == "FLOATS":
        span = pools["floats"].add(cpp_float(v, what) for v in value)
        return "{.kind = kFloats, .floats = %s}" % span
    if kind == "STRINGS":
        for v in value:
            if not isinstance(v, str):
                raise GenError("%s: expected strings, got %r" % (what, v))
        span = pools["strings"].add(cpp_string(v) for v in value)
        return "{.kind = kStrings, .strings = %s}" % span
    raise GenError("%s: a %s attribute cannot have a plain default" % (what, kind))


def formal_parameters(params, constraint_names, what):
    items = []
    for i, p in enumerate(params):
        check_keys(p, ["name", "type", "option", "homogeneous", "min_arity"], what)
        if p["option"] not in OPTIONS:
            raise GenError("%s: unknown option %r" % (what, p["option"]))
        if p["option"] == "variadic" and i != len(params) - 1:
            raise GenError("%s: variadic parameter %r is not the last" % (what, p["name"]))
        if p["type"] not in constraint_names and "(" not in p["type"]:
            raise GenError("%s: parameter %r has type %r, which is neither a type "
                           "constraint nor a type" % (what, p["name"], p["type"]))
        items.append("{%s, %s, %s, %s, %d}" % (
            cpp_string(p["name"]), cpp_string(p["type"]), OPTIONS[p["option"]],
            "true" if p["homogeneous"] else "false", int(p["min_arity"])))
    return items


def schema_initializer(s, pools):
    what = "%s::%s-%s" % (s.get("domain"), s.get("name"), s.get("since_version"))
    check_keys(s, ["domain", "name", "since_version", "deprecated", "support_level",
                   "min_input", "max_input", "min_output", "max_output", "inputs",
                   "outputs", "attributes", "type_constraints", "has_function_body"],
               what)
    if s["support_level"] not in SUPPORT_LEVELS:
        raise GenError("%s: unknown support level %r" % (what, s["support_level"]))
    for key in ("since_version", "min_input", "max_input", "min_output", "max_output"):
        v = s[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > INT32_MAX:
            raise GenError("%s: %s out of range: %r" % (what, key, v))
    if s["since_version"] < 1:
        raise GenError("%s: since_version must be at least 1" % what)

    constraints = []
    names = set()
    for c in s["type_constraints"]:
        check_keys(c, ["param", "allowed"], what)
        names.add(c["param"])
        allowed = pools["allowed"].add(cpp_string(t) for t in c["allowed"])
        constraints.append("{%s, %s}" % (cpp_string(c["param"]), allowed))

    attributes = []
    attribute_names = [a.get("name") for a in s["attributes"]]
    if attribute_names != sorted(attribute_names) or len(set(attribute_names)) != len(
            attribute_names):
        raise GenError("%s: attributes must be sorted by name and unique" % what)
    for a in s["attributes"]:
        check_keys(a, ["name", "type", "required", "default"], what)
        if a["type"] not in ATTRIBUTE_TYPES:
            raise GenError("%s: attribute %r has unknown type %r" % (what, a["name"], a["type"]))
        default = default_initializer(a, pools, "%s attribute %s" % (what, a["name"]))
        attributes.append("{%s, %s, %s, %s}" % (
            cpp_string(a["name"]), ATTRIBUTE_TYPES[a["type"]],
            "true" if a["required"] else "false", default))

    inputs = pools["params"].add(formal_parameters(s["inputs"], names, what))
    outputs = pools["params"].add(formal_parameters(s["outputs"], names, what))
    return "OpSchema({%s, %s, %d, %s, %s, %d, %d, %d, %d, %s, %s, %s, %s, %s})" % (
        cpp_string(s["domain"]), cpp_string(s["name"]), s["since_version"],
        "true" if s["deprecated"] else "false", SUPPORT_LEVELS[s["support_level"]],
        s["min_input"], s["max_input"], s["min_output"], s["max_output"],
        inputs, outputs, pools["attributes"].add(attributes),
        pools["constraints"].add(constraints),
        "true" if s["has_function_body"] else "false")


def generate(doc):
    if not isinstance(doc, dict) or not isinstance(doc.get("schemas"), list):
        raise GenError("expected an object with a 'schemas' list")
    schemas = doc["schemas"]
    if not schemas:
        raise GenError("no schemas")
    for s in schemas:
        if not isinstance(s, dict):
            raise GenError("a schema is not an object: %r" % (s,))
        check_keys(s, ["domain", "name", "since_version"], "schema")
        if s["domain"] == "":
            raise GenError("%s: write the default domain as 'ai.onnx'" % s["name"])
    schemas = sorted(schemas, key=lambda s: (s["domain"], s["name"], s["since_version"]))
    for a, b in zip(schemas, schemas[1:]):
        if (a["domain"], a["name"], a["since_version"]) == (b["domain"], b["name"],
                                                           b["since_version"]):
            raise GenError("duplicate schema %s::%s-%d" % (a["domain"], a["name"],
                                                           a["since_version"]))

    # Highest opset per domain: the declared one where given, and never below
    # the newest since_version in the table.
    max_opset = {}
    for s in schemas:
        max_opset[s["domain"]] = max(max_opset.get(s["domain"], 0), s["since_version"])
    for domain, opset in sorted((doc.get("max_opset") or {}).items()):
        domain = domain or "ai.onnx"
        if domain not in max_opset:
            raise GenError("max_opset names domain %r, which has no schemas" % domain)
        max_opset[domain] = max(max_opset[domain], int(opset))

    pools = {
        "allowed": Pool("kAllowedTypes"),
        "constraints": Pool("kTypeConstraints"),
        "ints": Pool("kDefaultInts"),
        "floats": Pool("kDefaultFloats"),
        "strings": Pool("kDefaultStrings"),
        "attributes": Pool("kAttributes"),
        "params": Pool("kFormalParameters"),
    }
    rows = [schema_initializer(s, pools) for s in schemas]

    out = [
        "// Operator schema table, generated by lib/ops/gen_schema_table.py from",
        "// lib/ops/schemas.json (%s). Do not edit." % doc.get("generated_by", "unknown source"),
        "// Included by lib/ops/registry.cc inside namespace onnxkit::ops::{anonymous}.",
        "// %d schemas, sorted by (domain, name, since_version)." % len(rows),
        "",
        "using enum ParamOption;",
        "using enum SupportLevel;",
        "using enum AttributeDefault::Kind;",
        "",
    ]
    pools["allowed"].emit(out, "std::string_view")
    pools["constraints"].emit(out, "TypeConstraint")
    pools["ints"].emit(out, "int64_t")
    pools["floats"].emit(out, "float")
    pools["strings"].emit(out, "std::string_view")
    pools["attributes"].emit(out, "AttributeSpec")
    pools["params"].emit(out, "FormalParameter")
    out.append("constexpr OpSchema kSchemas[] = {")
    out.extend("    %s," % row for row in rows)
    out.append("};")
    out.append("")
    out.append("constexpr DomainInfo kDomains[] = {")
    for domain in sorted(max_opset):
        out.append("    {%s, %d}," % (cpp_string(domain), max_opset[domain]))
    out.append("};")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: gen_schema_table.py schemas.json out.inc\n")
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            doc = json.load(f)
        text = generate(doc)
    except (OSError, ValueError, GenError) as e:
        sys.stderr.write("gen_schema_table.py: %s: %s\n" % (argv[1], e))
        return 1
    try:
        os.makedirs(os.path.dirname(os.path.abspath(argv[2])), exist_ok=True)
        with open(argv[2], "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    except OSError as e:
        sys.stderr.write("gen_schema_table.py: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

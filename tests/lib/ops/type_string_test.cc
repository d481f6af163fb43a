// Tests for lib/ops/type_string.h: ONNX's spelling of types, parsing with its
// error paths, and matching allowed-type strings against actual types.
#include "lib/ops/type_string.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "lib/base/data_type.h"
#include "lib/base/limits.h"

namespace onnxkit::ops {
namespace {

pb::TypeProto Tensor(int32_t elem) {
  pb::TypeProto type;
  type.tensor_type.mutable_value().elem_type = elem;
  return type;
}

pb::TypeProto SparseTensor(int32_t elem) {
  pb::TypeProto type;
  type.sparse_tensor_type.mutable_value().elem_type = elem;
  return type;
}

pb::TypeProto Seq(pb::TypeProto elem) {
  pb::TypeProto type;
  type.sequence_type.mutable_value().elem_type = std::move(elem);
  return type;
}

pb::TypeProto Optional(pb::TypeProto elem) {
  pb::TypeProto type;
  type.optional_type.mutable_value().elem_type = std::move(elem);
  return type;
}

pb::TypeProto Map(int32_t key, pb::TypeProto value) {
  pb::TypeProto type;
  type.map_type.mutable_value().key_type = key;
  type.map_type.mutable_value().value_type = std::move(value);
  return type;
}

pb::TypeProto Opaque(std::string domain, std::string name) {
  pb::TypeProto type;
  type.opaque_type.mutable_value().domain = std::move(domain);
  type.opaque_type.mutable_value().name = std::move(name);
  return type;
}

std::string ParseError(std::string_view text) {
  absl::StatusOr<pb::TypeProto> type = ParseTypeString(text);
  if (type.ok()) return "parsed as " + TypeToString(*type);
  EXPECT_EQ(type.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(type.status().message());
}

TEST(TypeToStringTest, SpellsTypesAsOnnxDoes) {
  EXPECT_EQ(TypeToString(Tensor(pb::kFloat)), "tensor(float)");
  EXPECT_EQ(TypeToString(Tensor(pb::kFloat8E4M3FN)), "tensor(float8e4m3fn)");
  EXPECT_EQ(TypeToString(Seq(Tensor(pb::kInt64))), "seq(tensor(int64))");
  EXPECT_EQ(TypeToString(Map(pb::kString, Tensor(pb::kFloat))), "map(string,tensor(float))");
  EXPECT_EQ(TypeToString(Seq(Map(pb::kInt64, Tensor(pb::kDouble)))), "seq(map(int64,tensor(double)))");
  EXPECT_EQ(TypeToString(SparseTensor(pb::kFloat)), "sparse_tensor(float)");
  EXPECT_EQ(TypeToString(Optional(Seq(Tensor(pb::kFloat16)))), "optional(seq(tensor(float16)))");
  EXPECT_EQ(TypeToString(Opaque("com.example", "Blob")), "opaque(com.example,Blob)");
  EXPECT_EQ(TypeToString(Opaque("", "Blob")), "opaque(Blob)");
}

TEST(TypeToStringTest, IgnoresShapesAndDenotations) {
  pb::TypeProto type = Tensor(pb::kInt8);
  auto& dims = type.tensor_type->shape.mutable_value().dim;
  dims.resize(2);
  dims[0].kind = pb::TensorShapeProto::Dimension::kValue;
  dims[0].dim_value = 3;
  type.denotation = "IMAGE";
  EXPECT_EQ(TypeToString(type), "tensor(int8)");
}

TEST(TypeToStringTest, UnsetPartsAreSpelledUndefined) {
  EXPECT_EQ(TypeToString(pb::TypeProto()), "undefined");
  EXPECT_EQ(TypeToString(Tensor(pb::kUndefined)), "tensor(undefined)");
  EXPECT_EQ(TypeToString(Tensor(99)), "tensor(data_type_99)");
  pb::TypeProto seq;
  seq.sequence_type.mutable_value();
  EXPECT_EQ(TypeToString(seq), "seq(undefined)");
  // Neither spelling parses back.
  EXPECT_FALSE(ParseTypeString("tensor(undefined)").ok());
  EXPECT_FALSE(ParseTypeString("seq(undefined)").ok());
  EXPECT_FALSE(ParseTypeString("tensor(data_type_99)").ok());
}

TEST(ParseTypeStringTest, BuildsTheNestedStructure) {
  absl::StatusOr<pb::TypeProto> type = ParseTypeString("optional(seq(map(int64,tensor(float))))");
  ASSERT_TRUE(type.ok()) << type.status();
  ASSERT_TRUE(type->optional_type);
  EXPECT_FALSE(type->tensor_type);
  const pb::TypeProto& seq = *type->optional_type->elem_type;
  ASSERT_TRUE(seq.sequence_type);
  const pb::TypeProto& map = *seq.sequence_type->elem_type;
  ASSERT_TRUE(map.map_type);
  EXPECT_EQ(map.map_type->key_type, pb::kInt64);
  ASSERT_TRUE(map.map_type->value_type);
  ASSERT_TRUE(map.map_type->value_type->tensor_type);
  EXPECT_EQ(map.map_type->value_type->tensor_type->elem_type, pb::kFloat);
  EXPECT_FALSE(map.map_type->value_type->tensor_type->shape);  // rank unknown
}

TEST(ParseTypeStringTest, BareElementTypeIsAScalarTensor) {
  absl::StatusOr<pb::TypeProto> type = ParseTypeString("float");
  ASSERT_TRUE(type.ok()) << type.status();
  ASSERT_TRUE(type->tensor_type);
  EXPECT_EQ(type->tensor_type->elem_type, pb::kFloat);
  ASSERT_TRUE(type->tensor_type->shape);  // rank 0
  EXPECT_TRUE(type->tensor_type->shape->dim.empty());
  EXPECT_EQ(TypeToString(*type), "tensor(float)");
}

TEST(ParseTypeStringTest, RoundTripsCanonicalSpellings) {
  for (std::string_view text : {
           "tensor(float)",
           "tensor(bfloat16)",
           "seq(tensor(int64))",
           "seq(seq(tensor(uint8)))",
           "optional(tensor(int4))",
           "optional(seq(tensor(complex128)))",
           "map(string,tensor(float))",
           "map(int64,seq(tensor(double)))",
           "seq(map(string,tensor(int64)))",
           "optional(seq(map(int32,optional(tensor(float8e5m2fnuz)))))",
           "sparse_tensor(float)",
           "seq(sparse_tensor(int2))",
           "map(uint8,sparse_tensor(bool))",
           "opaque(com.example,Blob)",
           "opaque(Blob)",
           "opaque(com.example,)",
           "opaque()",
       }) {
    absl::StatusOr<pb::TypeProto> type = ParseTypeString(text);
    ASSERT_TRUE(type.ok()) << text << ": " << type.status();
    EXPECT_EQ(TypeToString(*type), text);
    EXPECT_TRUE(TypeStringMatches(text, *type)) << text;
  }
}

TEST(ParseTypeStringTest, RoundTripsEveryElementType) {
  for (int32_t elem = 1; IsKnownDataType(elem); ++elem) {
    const std::string text = "tensor(" + std::string(DataTypeName(elem)) + ")";
    absl::StatusOr<pb::TypeProto> type = ParseTypeString(text);
    ASSERT_TRUE(type.ok()) << text << ": " << type.status();
    EXPECT_EQ(type->tensor_type->elem_type, elem);
    EXPECT_EQ(TypeToString(*type), text);
  }
}

TEST(ParseTypeStringTest, NormalizesSchemaSpellings) {
  // How ai.onnx.ml schemas write maps, and stray whitespace.
  for (auto [input, canonical] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"map(int64, float)", "map(int64,tensor(float))"},
           {"seq(map(string, float))", "seq(map(string,tensor(float)))"},
           {" seq ( tensor( int64 ) ) ", "seq(tensor(int64))"},
           {"optional(\tseq(tensor(bool))\n)", "optional(seq(tensor(bool)))"},
       }) {
    absl::StatusOr<pb::TypeProto> type = ParseTypeString(input);
    ASSERT_TRUE(type.ok()) << input << ": " << type.status();
    EXPECT_EQ(TypeToString(*type), canonical);
  }
}

TEST(ParseTypeStringTest, RejectsMalformedText) {
  EXPECT_EQ(ParseError("tensor(foo)"),
            "invalid type string 'tensor(foo)' at offset 7: unknown element type 'foo'");
  EXPECT_EQ(ParseError("vector(float)"),
            "invalid type string 'vector(float)' at offset 0: unknown type constructor 'vector'; "
            "expected tensor, sparse_tensor, seq, optional, map or opaque");
  EXPECT_EQ(ParseError("tensor(float"), "invalid type string 'tensor(float' at offset 12: expected ')'");
  EXPECT_EQ(ParseError("tensor(float))"),
            "invalid type string 'tensor(float))' at offset 13: unexpected text after the type");
  EXPECT_EQ(ParseError("map(int64 float)"),
            "invalid type string 'map(int64 float)' at offset 10: expected ',' after the map key type");
  EXPECT_EQ(ParseError(""), "invalid type string '' at offset 0: expected a type");
  for (std::string_view text :
       {"tensor", "tensor(", "tensor()", "tensor(undefined)", "seq()", "seq(tensor(float)", "map(int64)",
        "map(,tensor(float))", "map(int64,)", "optional", "tensor(float) tensor(float)", "Tensor(float)",
        "FLOAT", "seq(tensor(float)]", "(float)"}) {
    EXPECT_FALSE(ParseTypeString(text).ok()) << text;
  }
}

TEST(ParseTypeStringTest, EscapesHostileTextInMessages) {
  const std::string message = ParseError(std::string("tensor(\n\xfe)", 10));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("tensor(\\n\\xfe)"), std::string::npos) << message;
}

TEST(ParseTypeStringTest, LimitsNestingDepth) {
  auto nested = [](int levels) {
    std::string text;
    for (int i = 0; i < levels; ++i) text += "seq(";
    text += "tensor(float)";
    text.append(levels, ')');
    return text;
  };
  const int deepest = limits::kMaxMessageDepth - 1;  // plus the tensor itself
  absl::StatusOr<pb::TypeProto> ok = ParseTypeString(nested(deepest));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(TypeStringMatches(nested(deepest), *ok));
  EXPECT_NE(ParseError(nested(deepest + 1)).find("nested deeper than"), std::string::npos);
  EXPECT_FALSE(ParseTypeString(nested(100000)).ok());
  EXPECT_FALSE(TypeStringMatches(nested(100000), Tensor(pb::kFloat)));
}

TEST(TypeStringMatchesTest, ComparesKindsAndElementTypes) {
  EXPECT_TRUE(TypeStringMatches("tensor(float)", Tensor(pb::kFloat)));
  EXPECT_FALSE(TypeStringMatches("tensor(float)", Tensor(pb::kDouble)));
  EXPECT_FALSE(TypeStringMatches("tensor(float)", SparseTensor(pb::kFloat)));
  EXPECT_TRUE(TypeStringMatches("sparse_tensor(float)", SparseTensor(pb::kFloat)));
  EXPECT_FALSE(TypeStringMatches("sparse_tensor(float)", Tensor(pb::kFloat)));
  EXPECT_FALSE(TypeStringMatches("tensor(float)", Seq(Tensor(pb::kFloat))));
  EXPECT_FALSE(TypeStringMatches("seq(tensor(float))", Tensor(pb::kFloat)));
  EXPECT_TRUE(TypeStringMatches("seq(tensor(float))", Seq(Tensor(pb::kFloat))));
  EXPECT_FALSE(TypeStringMatches("seq(tensor(float))", Optional(Tensor(pb::kFloat))));
  EXPECT_TRUE(TypeStringMatches("optional(seq(tensor(int64)))", Optional(Seq(Tensor(pb::kInt64)))));
  EXPECT_FALSE(TypeStringMatches("optional(seq(tensor(int64)))", Optional(Seq(Tensor(pb::kInt32)))));
  EXPECT_FALSE(TypeStringMatches("optional(tensor(int64))", Tensor(pb::kInt64)));
}

TEST(TypeStringMatchesTest, MapsInSchemaAndCanonicalSpelling) {
  const pb::TypeProto map = Map(pb::kInt64, Tensor(pb::kFloat));
  EXPECT_TRUE(TypeStringMatches("map(int64, float)", map));
  EXPECT_TRUE(TypeStringMatches("map(int64,tensor(float))", map));
  EXPECT_FALSE(TypeStringMatches("map(string, float)", map));
  EXPECT_FALSE(TypeStringMatches("map(int64, double)", map));
  EXPECT_FALSE(TypeStringMatches("map(int64, seq(tensor(float)))", map));
  EXPECT_TRUE(TypeStringMatches("seq(map(int64, float))", Seq(map)));
  EXPECT_FALSE(TypeStringMatches("map(int64, float)", Map(pb::kInt64, pb::TypeProto())));
}

TEST(TypeStringMatchesTest, IgnoresShapes) {
  pb::TypeProto type = Tensor(pb::kUint8);
  type.tensor_type->shape.mutable_value().dim.resize(4);
  EXPECT_TRUE(TypeStringMatches("tensor(uint8)", type));
  EXPECT_TRUE(TypeStringMatches("uint8", type));
  EXPECT_TRUE(TypeStringMatches("uint8", Tensor(pb::kUint8)));
}

TEST(TypeStringMatchesTest, OpaqueComparesDomainAndName) {
  EXPECT_TRUE(TypeStringMatches("opaque(com.example,Blob)", Opaque("com.example", "Blob")));
  EXPECT_FALSE(TypeStringMatches("opaque(com.example,Blob)", Opaque("", "Blob")));
  EXPECT_TRUE(TypeStringMatches("opaque(Blob)", Opaque("", "Blob")));
  EXPECT_FALSE(TypeStringMatches("opaque(Blob)", Opaque("com.example", "Blob")));
}

TEST(TypeStringMatchesTest, MalformedOrUnsetNeverMatches) {
  for (std::string_view allowed : {"", "tensor", "tensor(float", "tensor(float))", "tensor(foo)",
                                   "tensor(float) x", "tensor(undefined)", "undefined"}) {
    EXPECT_FALSE(TypeStringMatches(allowed, Tensor(pb::kFloat))) << allowed;
  }
  EXPECT_FALSE(TypeStringMatches("tensor(undefined)", Tensor(pb::kUndefined)));
  EXPECT_FALSE(TypeStringMatches("tensor(float)", pb::TypeProto()));
  pb::TypeProto seq;
  seq.sequence_type.mutable_value();
  EXPECT_FALSE(TypeStringMatches("seq(tensor(float))", seq));
}

}  // namespace
}  // namespace onnxkit::ops

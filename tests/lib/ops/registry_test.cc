// Tests for lib/ops/registry.h and lib/ops/schema.h: real facts of the onnx
// 1.23 operator table, version selection, and every lookup error path.
#include "lib/ops/registry.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "lib/ops/type_string.h"

namespace onnxkit::ops {
namespace {

std::string Message(const absl::Status& status) { return std::string(status.message()); }

const OpSchema& MustFind(std::string_view domain, std::string_view op, int64_t opset) {
  const OpSchema* schema = FindSchema(domain, op, opset);
  EXPECT_NE(schema, nullptr) << domain << "::" << op << " opset " << opset;
  static const OpSchema* const kFallback = &AllSchemas().front();
  return schema != nullptr ? *schema : *kFallback;
}

TEST(RegistryTest, TableHoldsEverySchemaOfOnnx123) {
  EXPECT_EQ(AllSchemas().size(), 642u);
  std::map<std::string, int> per_domain;
  for (const OpSchema& schema : AllSchemas()) ++per_domain[std::string(schema.domain())];
  EXPECT_EQ(
      per_domain,
      (std::map<std::string, int>{
          {"ai.onnx", 612}, {"ai.onnx.ml", 25}, {"ai.onnx.preview", 1}, {"ai.onnx.preview.training", 4}}));
}

TEST(RegistryTest, TableIsSortedAndUnique) {
  const auto schemas = AllSchemas();
  for (size_t i = 1; i < schemas.size(); ++i) {
    const auto prev =
        std::make_tuple(schemas[i - 1].domain(), schemas[i - 1].name(), schemas[i - 1].since_version());
    const auto cur = std::make_tuple(schemas[i].domain(), schemas[i].name(), schemas[i].since_version());
    EXPECT_LT(prev, cur) << "at index " << i << ": " << schemas[i].name();
  }
}

TEST(RegistryTest, EveryOpsVersionsAscendAndSelectByOpset) {
  for (const OpSchema& schema : AllSchemas()) {
    const std::vector<const OpSchema*> versions = SchemaVersions(schema.domain(), schema.name());
    ASSERT_FALSE(versions.empty()) << schema.name();
    EXPECT_NE(std::find(versions.begin(), versions.end(), &schema), versions.end());
    for (size_t i = 0; i < versions.size(); ++i) {
      const OpSchema* v = versions[i];
      EXPECT_EQ(v->domain(), schema.domain());
      EXPECT_EQ(v->name(), schema.name());
      if (i > 0) {
        EXPECT_LT(versions[i - 1]->since_version(), v->since_version()) << v->name();
      }
      // A version is in effect from its since_version until the next one.
      EXPECT_EQ(FindSchema(v->domain(), v->name(), v->since_version()), v);
      const OpSchema* before = i > 0 ? versions[i - 1] : nullptr;
      EXPECT_EQ(FindSchema(v->domain(), v->name(), v->since_version() - 1), before);
    }
  }
}

TEST(RegistryTest, ReluVersions) {
  EXPECT_EQ(MustFind("", "Relu", 13).since_version(), 13);
  EXPECT_EQ(MustFind("", "Relu", 14).since_version(), 14);
  EXPECT_EQ(MustFind("", "Relu", 12).since_version(), 6);
  EXPECT_EQ(MustFind("", "Relu", 5).since_version(), 1);
  EXPECT_EQ(MustFind("", "Relu", 28).since_version(), 14);
  // "" and "ai.onnx" are one domain; the schema spells it "ai.onnx".
  EXPECT_EQ(FindSchema("", "Relu", 13), FindSchema("ai.onnx", "Relu", 13));
  EXPECT_EQ(MustFind("", "Relu", 13).domain(), "ai.onnx");
  EXPECT_TRUE(MustFind("", "Relu", 14).has_function_body());
  EXPECT_FALSE(MustFind("", "Relu", 13).has_function_body());

  std::vector<int64_t> since;
  for (const OpSchema* v : SchemaVersions("", "Relu")) since.push_back(v->since_version());
  EXPECT_EQ(since, (std::vector<int64_t>{1, 6, 13, 14}));
}

TEST(RegistryTest, ConvAttributesAndDefaults) {
  const OpSchema& conv = MustFind("", "Conv", 22);
  EXPECT_EQ(conv.since_version(), 22);
  EXPECT_EQ(conv.min_input(), 2);
  EXPECT_EQ(conv.max_input(), 3);
  ASSERT_EQ(conv.inputs().size(), 3u);
  EXPECT_EQ(conv.inputs()[0].name, "X");
  EXPECT_EQ(conv.inputs()[1].name, "W");
  EXPECT_EQ(conv.inputs()[2].name, "B");
  EXPECT_EQ(conv.inputs()[2].option, ParamOption::kOptional);
  EXPECT_EQ(conv.inputs()[0].option, ParamOption::kSingle);

  std::vector<std::string_view> names;
  for (const AttributeSpec& attr : conv.attributes()) names.push_back(attr.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{"auto_pad", "dilations", "group", "kernel_shape", "pads",
                                                  "strides"}));

  const AttributeSpec* auto_pad = conv.FindAttribute("auto_pad");
  ASSERT_NE(auto_pad, nullptr);
  EXPECT_EQ(auto_pad->type, pb::kAttrString);
  EXPECT_FALSE(auto_pad->required);
  ASSERT_TRUE(auto_pad->has_default());
  EXPECT_EQ(auto_pad->default_value.kind, AttributeDefault::Kind::kString);
  EXPECT_EQ(auto_pad->default_value.s, "NOTSET");

  const AttributeSpec* group = conv.FindAttribute("group");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->type, pb::kAttrInt);
  EXPECT_EQ(group->default_value.kind, AttributeDefault::Kind::kInt);
  EXPECT_EQ(group->default_value.i, 1);

  const AttributeSpec* kernel_shape = conv.FindAttribute("kernel_shape");
  ASSERT_NE(kernel_shape, nullptr);
  EXPECT_EQ(kernel_shape->type, pb::kAttrInts);
  EXPECT_FALSE(kernel_shape->has_default());
  EXPECT_EQ(conv.FindAttribute("kernel"), nullptr);

  // Conv-22 added bfloat16; Conv-11 did not accept it.
  auto allowed = [](const OpSchema& s) {
    auto types = s.AllowedTypes(s.inputs()[0]);
    return std::vector<std::string_view>(types.begin(), types.end());
  };
  EXPECT_EQ(allowed(conv), (std::vector<std::string_view>{"tensor(bfloat16)", "tensor(float16)",
                                                          "tensor(float)", "tensor(double)"}));
  EXPECT_EQ(MustFind("", "Conv", 21).since_version(), 11);
  EXPECT_EQ(allowed(MustFind("", "Conv", 21)),
            (std::vector<std::string_view>{"tensor(float16)", "tensor(float)", "tensor(double)"}));
}

TEST(RegistryTest, ListAndFloatDefaults) {
  const AttributeSpec* activations = MustFind("", "RNN", 22).FindAttribute("activations");
  ASSERT_NE(activations, nullptr);
  EXPECT_EQ(activations->type, pb::kAttrStrings);
  ASSERT_EQ(activations->default_value.kind, AttributeDefault::Kind::kStrings);
  EXPECT_EQ(std::vector<std::string_view>(activations->default_value.strings.begin(),
                                          activations->default_value.strings.end()),
            (std::vector<std::string_view>{"Tanh", "Tanh"}));

  const AttributeSpec* axes = MustFind("", "MeanVarianceNormalization", 13).FindAttribute("axes");
  ASSERT_NE(axes, nullptr);
  ASSERT_EQ(axes->default_value.kind, AttributeDefault::Kind::kInts);
  EXPECT_EQ(std::vector<int64_t>(axes->default_value.ints.begin(), axes->default_value.ints.end()),
            (std::vector<int64_t>{0, 2, 3}));

  const AttributeSpec* epsilon = MustFind("", "BatchNormalization", 15).FindAttribute("epsilon");
  ASSERT_NE(epsilon, nullptr);
  EXPECT_EQ(epsilon->default_value.kind, AttributeDefault::Kind::kFloat);
  EXPECT_EQ(epsilon->default_value.f, 1e-5f);
  EXPECT_EQ(MustFind("", "LeakyRelu", 16).FindAttribute("alpha")->default_value.f, 0.01f);
  EXPECT_EQ(MustFind("", "Selu", 6).FindAttribute("alpha")->default_value.f, 1.6732632f);
  EXPECT_EQ(MustFind("", "Gelu", 20).FindAttribute("approximate")->default_value.s, "none");
  // A required attribute has no default.
  const AttributeSpec* concat_axis = MustFind("", "Concat", 13).FindAttribute("axis");
  ASSERT_NE(concat_axis, nullptr);
  EXPECT_TRUE(concat_axis->required);
  EXPECT_FALSE(concat_axis->has_default());
}

TEST(RegistryTest, VariadicInputs) {
  const OpSchema& concat = MustFind("", "Concat", 13);
  ASSERT_EQ(concat.inputs().size(), 1u);
  EXPECT_EQ(concat.inputs()[0].option, ParamOption::kVariadic);
  EXPECT_TRUE(concat.inputs()[0].homogeneous);
  EXPECT_EQ(concat.inputs()[0].min_arity, 1);
  EXPECT_EQ(concat.min_input(), 1);
  EXPECT_EQ(concat.max_input(), 2147483647);

  const OpSchema& if_op = MustFind("", "If", 21);
  ASSERT_EQ(if_op.outputs().size(), 1u);
  EXPECT_EQ(if_op.outputs()[0].option, ParamOption::kVariadic);
  EXPECT_FALSE(if_op.outputs()[0].homogeneous);
  EXPECT_EQ(if_op.FindAttribute("then_branch")->type, pb::kAttrGraph);
}

TEST(RegistryTest, GeluIsDefinedFromOpset20) {
  EXPECT_EQ(FindSchema("", "Gelu", 17), nullptr);
  absl::StatusOr<const OpSchema*> result = LookupSchema("", "Gelu", 17);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Message(result.status()),
            "op 'Gelu' is not defined in ai.onnx opset 17; its first version is opset 20");

  result = LookupSchema("ai.onnx", "Gelu", 20);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)->since_version(), 20);
  EXPECT_TRUE((*result)->has_function_body());
}

TEST(RegistryTest, DeprecatedSchemasAreReturnedAsIs) {
  EXPECT_FALSE(MustFind("", "Upsample", 9).deprecated());
  const OpSchema& upsample = MustFind("", "Upsample", 10);
  EXPECT_EQ(upsample.since_version(), 10);
  EXPECT_TRUE(upsample.deprecated());
  // Still the schema in effect at later opsets.
  EXPECT_EQ(FindSchema("", "Upsample", 13), &upsample);
  absl::StatusOr<const OpSchema*> result = LookupSchema("", "Upsample", 11);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE((*result)->deprecated());
  EXPECT_TRUE(MustFind("", "Scatter", 11).deprecated());
  EXPECT_FALSE(MustFind("", "Scatter", 10).deprecated());
}

TEST(RegistryTest, MlDomain) {
  EXPECT_EQ(MaxKnownOpset("ai.onnx.ml"), 5);
  const OpSchema& linear = MustFind("ai.onnx.ml", "LinearClassifier", 5);
  EXPECT_EQ(linear.since_version(), 1);
  EXPECT_EQ(linear.domain(), "ai.onnx.ml");
  EXPECT_EQ(linear.min_output(), 2);
  const AttributeSpec* coefficients = linear.FindAttribute("coefficients");
  ASSERT_NE(coefficients, nullptr);
  EXPECT_TRUE(coefficients->required);
  EXPECT_EQ(coefficients->type, pb::kAttrFloats);
  EXPECT_EQ(linear.FindAttribute("post_transform")->default_value.s, "NONE");
  EXPECT_EQ(linear.FindAttribute("multi_class")->default_value.i, 0);
  // Output Z has a concrete type instead of a type parameter.
  ASSERT_EQ(linear.outputs().size(), 2u);
  EXPECT_FALSE(linear.outputs()[1].is_type_parameter());
  auto z_types = linear.AllowedTypes(linear.outputs()[1]);
  ASSERT_EQ(z_types.size(), 1u);
  EXPECT_EQ(z_types[0], "tensor(float)");
  EXPECT_TRUE(linear.outputs()[0].is_type_parameter());
  EXPECT_EQ(linear.AllowedTypes(linear.outputs()[0]).size(), 2u);  // string, int64

  std::vector<int64_t> since;
  for (const OpSchema* v : SchemaVersions("ai.onnx.ml", "TreeEnsembleClassifier")) {
    since.push_back(v->since_version());
  }
  EXPECT_EQ(since, (std::vector<int64_t>{1, 3, 5}));
  EXPECT_TRUE(MustFind("ai.onnx.ml", "TreeEnsembleClassifier", 5).deprecated());
  EXPECT_FALSE(MustFind("ai.onnx.ml", "TreeEnsembleClassifier", 4).deprecated());
  EXPECT_EQ(MustFind("ai.onnx.ml", "TreeEnsemble", 5).since_version(), 5);
  EXPECT_EQ(FindSchema("ai.onnx.ml", "TreeEnsemble", 4), nullptr);
  // ML ops are not in the default domain.
  EXPECT_EQ(FindSchema("", "LinearClassifier", 13), nullptr);
}

TEST(RegistryTest, ZipMapOutputMatchesMapTypes) {
  const OpSchema& zipmap = MustFind("ai.onnx.ml", "ZipMap", 1);
  auto allowed = zipmap.AllowedTypes(zipmap.outputs()[0]);
  ASSERT_EQ(allowed.size(), 2u);
  EXPECT_EQ(allowed[0], "seq(map(string, float))");
  absl::StatusOr<pb::TypeProto> actual = ParseTypeString("seq(map(string,tensor(float)))");
  ASSERT_TRUE(actual.ok()) << actual.status();
  EXPECT_TRUE(TypeStringMatches(allowed[0], *actual));
  EXPECT_FALSE(TypeStringMatches(allowed[1], *actual));
}

TEST(RegistryTest, EveryTypeStringInTheTableParses) {
  for (const OpSchema& schema : AllSchemas()) {
    for (const auto params : {schema.inputs(), schema.outputs()}) {
      for (const FormalParameter& param : params) {
        if (param.is_type_parameter()) {
          EXPECT_NE(schema.FindTypeConstraint(param.type_str), nullptr)
              << schema.name() << "-" << schema.since_version() << " " << param.name;
        }
        EXPECT_FALSE(schema.AllowedTypes(param).empty()) << schema.name() << " " << param.name;
      }
    }
    for (const TypeConstraint& constraint : schema.type_constraints()) {
      EXPECT_FALSE(constraint.allowed_types.empty()) << schema.name();
      for (std::string_view allowed : constraint.allowed_types) {
        absl::StatusOr<pb::TypeProto> type = ParseTypeString(allowed);
        ASSERT_TRUE(type.ok()) << type.status();
        EXPECT_TRUE(TypeStringMatches(allowed, *type)) << allowed;
      }
    }
  }
}

TEST(RegistryTest, Domains) {
  EXPECT_EQ(MaxKnownOpset(""), 28);
  EXPECT_EQ(MaxKnownOpset("ai.onnx"), 28);
  EXPECT_EQ(MaxKnownOpset("ai.onnx.preview.training"), 1);
  EXPECT_EQ(MaxKnownOpset("ai.onnx.preview"), 1);
  EXPECT_EQ(MaxKnownOpset("com.microsoft"), 0);
  EXPECT_TRUE(IsKnownDomain(""));
  EXPECT_TRUE(IsKnownDomain("ai.onnx"));
  EXPECT_TRUE(IsKnownDomain("ai.onnx.ml"));
  EXPECT_FALSE(IsKnownDomain("com.microsoft"));
  EXPECT_FALSE(IsKnownDomain("ai.onnx.ML"));
  EXPECT_EQ(KnownDomains(), (std::vector<std::string_view>{"ai.onnx", "ai.onnx.ml", "ai.onnx.preview",
                                                           "ai.onnx.preview.training"}));
  EXPECT_EQ(CanonicalDomain(""), "ai.onnx");
  EXPECT_EQ(CanonicalDomain("ai.onnx.ml"), "ai.onnx.ml");
  EXPECT_EQ(MustFind("ai.onnx.preview.training", "Adam", 1).name(), "Adam");
  EXPECT_EQ(MustFind("ai.onnx.preview", "FlexAttention", 1).support_level(), SupportLevel::kExperimental);
  EXPECT_EQ(MustFind("", "Upsample", 1).support_level(), SupportLevel::kExperimental);
  EXPECT_EQ(MustFind("", "Upsample", 7).support_level(), SupportLevel::kCommon);
}

TEST(RegistryTest, UnknownDomainListsKnownOnes) {
  EXPECT_EQ(FindSchema("com.microsoft", "FusedConv", 1), nullptr);
  absl::StatusOr<const OpSchema*> result = LookupSchema("com.microsoft", "FusedConv", 1);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Message(result.status()),
            "unknown operator domain 'com.microsoft'; known domains are ai.onnx (also written "
            "\"\"), ai.onnx.ml, ai.onnx.preview, ai.onnx.preview.training");
}

TEST(RegistryTest, OpsetOutOfRange) {
  for (int64_t opset : {int64_t{0}, int64_t{-1}, int64_t{29}, int64_t{1} << 40}) {
    EXPECT_EQ(FindSchema("", "Relu", opset), nullptr) << opset;
    absl::StatusOr<const OpSchema*> result = LookupSchema("", "Relu", opset);
    ASSERT_FALSE(result.ok()) << opset;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << opset;
  }
  EXPECT_EQ(Message(LookupSchema("", "Relu", 29).status()),
            "opset 29 is out of range for domain ai.onnx: known opsets are 1 to 28");
  EXPECT_EQ(Message(LookupSchema("ai.onnx.ml", "ZipMap", 6).status()),
            "opset 6 is out of range for domain ai.onnx.ml: known opsets are 1 to 5");
  EXPECT_TRUE(LookupSchema("", "Relu", 28).ok());
  EXPECT_TRUE(LookupSchema("", "Relu", 1).ok());
}

TEST(RegistryTest, UnknownOpSuggestsClosestName) {
  absl::StatusOr<const OpSchema*> result = LookupSchema("", "Reluu", 13);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Message(result.status()), "unknown op 'Reluu' in domain ai.onnx; did you mean 'Relu'?");
  EXPECT_EQ(Message(LookupSchema("", "relu", 13).status()),
            "unknown op 'relu' in domain ai.onnx; did you mean 'Relu'?");
  EXPECT_EQ(Message(LookupSchema("", "Sofmax", 13).status()),
            "unknown op 'Sofmax' in domain ai.onnx; did you mean 'Softmax'?");
  // Nothing close: no suggestion.
  EXPECT_EQ(Message(LookupSchema("", "Xyzzy", 13).status()), "unknown op 'Xyzzy' in domain ai.onnx");
  EXPECT_EQ(Message(LookupSchema("", "", 13).status()), "unknown op '' in domain ai.onnx");
  EXPECT_EQ(FindSchema("", "Reluu", 13), nullptr);
  EXPECT_TRUE(SchemaVersions("", "Reluu").empty());
}

TEST(RegistryTest, OpInAnotherDomainIsNamed) {
  EXPECT_EQ(Message(LookupSchema("", "ZipMap", 13).status()),
            "unknown op 'ZipMap' in domain ai.onnx; it is defined in domain ai.onnx.ml");
  EXPECT_EQ(Message(LookupSchema("ai.onnx.ml", "Relu", 3).status()),
            "unknown op 'Relu' in domain ai.onnx.ml; it is defined in domain ai.onnx");
}

TEST(RegistryTest, UnknownNamesAreEscapedInMessages) {
  const std::string op("Re\nlu\xff", 6);
  absl::StatusOr<const OpSchema*> result = LookupSchema("", op, 13);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(Message(result.status()).find('\n'), std::string::npos);
  EXPECT_NE(Message(result.status()).find("Re\\nlu\\xff"), std::string::npos) << result.status();
}

}  // namespace
}  // namespace onnxkit::ops

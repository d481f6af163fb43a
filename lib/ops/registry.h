// The operator registry: every operator schema onnx 1.23 defines, compiled in
// from lib/ops/schemas.json (ai.onnx opsets 1–28, ai.onnx.ml 1–5,
// ai.onnx.preview 1, ai.onnx.preview.training 1). It is the one source of
// operator facts for the checker, the converter and the runner.
//
// An op's schema at opset N is the version with the largest since_version
// <= N. The default domain may be written "" or "ai.onnx"; both name the same
// domain everywhere below. Lookups never allocate on success, are thread-safe
// and need no initialization.
//
//   ONNXKIT_ASSIGN_OR_RETURN(const OpSchema* relu, LookupSchema("", "Relu", 13));
//   // relu->since_version() == 13
//   LookupSchema("", "Gelu", 17).status().message()
//   // "op 'Gelu' is not defined in ai.onnx opset 17; its first version is opset 20"
#ifndef ONNXKIT_LIB_OPS_REGISTRY_H_
#define ONNXKIT_LIB_OPS_REGISTRY_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ops/schema.h"

namespace onnxkit::ops {

inline constexpr std::string_view kOnnxDomain = "ai.onnx";
inline constexpr std::string_view kOnnxMlDomain = "ai.onnx.ml";
inline constexpr std::string_view kOnnxPreviewDomain = "ai.onnx.preview";
inline constexpr std::string_view kOnnxTrainingDomain = "ai.onnx.preview.training";

// "ai.onnx" for "" and "ai.onnx"; any other domain unchanged.
std::string_view CanonicalDomain(std::string_view domain);

// True for a domain with at least one schema ("" included).
bool IsKnownDomain(std::string_view domain);

// The known domains, canonical spelling, sorted.
std::vector<std::string_view> KnownDomains();

// The highest opset of `domain` the table knows (28 for ai.onnx, 5 for
// ai.onnx.ml); 0 for an unknown domain.
int64_t MaxKnownOpset(std::string_view domain);

// Every schema, sorted by (domain, name, since_version).
std::span<const OpSchema> AllSchemas();

// Every version of `op` in `domain`, since_version ascending; empty when the
// op is unknown.
std::vector<const OpSchema*> SchemaVersions(std::string_view domain, std::string_view op);

// The schema of `op` at `opset` of `domain`; nullptr when there is none
// (unknown domain or op, opset outside 1..MaxKnownOpset, or op introduced
// after `opset`). A deprecated schema is returned as is: check deprecated().
const OpSchema* FindSchema(std::string_view domain, std::string_view op, int64_t opset);

// Like FindSchema, with an error saying why there is no schema:
//   NotFound         unknown domain (lists the known ones); unknown op (names
//                    the closest op when one is close, or the domain that
//                    defines it); op first defined in a later opset.
//   InvalidArgument  opset < 1 or > MaxKnownOpset(domain).
absl::StatusOr<const OpSchema*> LookupSchema(std::string_view domain, std::string_view op, int64_t opset);

}  // namespace onnxkit::ops

#endif  // ONNXKIT_LIB_OPS_REGISTRY_H_

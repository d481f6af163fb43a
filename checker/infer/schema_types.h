// Output types from an operator's schema (see schema_types.cc).
#ifndef ONNXKIT_CHECKER_INFER_SCHEMA_TYPES_H_
#define ONNXKIT_CHECKER_INFER_SCHEMA_TYPES_H_

#include "checker/infer/context.h"
#include "lib/ops/schema.h"

namespace onnxkit::checker::infer {

// Sets the output types of `ctx` that `schema` determines from the input
// types: bound type parameters, concrete formal types, and parameters
// allowing a single type. Shapes are left unknown.
void InferSchemaTypes(const ops::OpSchema& schema, NodeContext& ctx);

}  // namespace onnxkit::checker::infer

#endif  // ONNXKIT_CHECKER_INFER_SCHEMA_TYPES_H_

// The shape functions, one per op family file, and the table that maps
// (domain, op) to them (shape_fns.def; the table and its lookup are in
// engine.cc).
#ifndef ONNXKIT_LIB_INFER_SHAPE_FNS_H_
#define ONNXKIT_LIB_INFER_SHAPE_FNS_H_

#include <string_view>

#include "lib/infer/context.h"

namespace onnxkit::infer {

// Reads the node's inputs and attributes from `ctx` and sets its output
// shapes (and types the schema cannot give); calls ctx.Fail for impossible
// shapes.
using ShapeFn = void (*)(NodeContext& ctx);

// The shape function of `op` in `domain` ("" and "ai.onnx" alike); null if none.
ShapeFn FindShapeFn(std::string_view domain, std::string_view op);

#define ONNXKIT_SHAPE_FN(domain, op, function) void function(NodeContext& ctx);
#include "lib/infer/shape_fns.def"
#undef ONNXKIT_SHAPE_FN

}  // namespace onnxkit::infer

#endif  // ONNXKIT_LIB_INFER_SHAPE_FNS_H_

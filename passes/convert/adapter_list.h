// Declarations of every adapter function adapters.def names.
#ifndef ONNXKIT_PASSES_CONVERT_ADAPTER_LIST_H_
#define ONNXKIT_PASSES_CONVERT_ADAPTER_LIST_H_

#include "passes/convert/adapter.h"

namespace onnxkit::passes::convert {

#define ONNXKIT_ADAPTER(op, boundary, dir, name, fn) absl::Status fn(Step& step);
#include "passes/convert/adapters.def"
#undef ONNXKIT_ADAPTER

}  // namespace onnxkit::passes::convert

#endif  // ONNXKIT_PASSES_CONVERT_ADAPTER_LIST_H_

// The factories of every pass, declared from passes/passes.def; each is
// defined in the pass's own file.
#ifndef ONNXKIT_PASSES_PASS_LIST_H_
#define ONNXKIT_PASSES_PASS_LIST_H_

#include <memory>

#include "passes/pass.h"

namespace onnxkit::passes {

#define ONNXKIT_PASS(name, create, in_default, needs_shapes, numerics, description) \
  std::unique_ptr<Pass> create();
#include "passes/passes.def"
#undef ONNXKIT_PASS

}  // namespace onnxkit::passes

#endif  // ONNXKIT_PASSES_PASS_LIST_H_

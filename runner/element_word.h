// Element-size dispatch for kernels that only move elements (Where, Expand,
// GatherElements, ScatterElements): such a kernel copies each element as an
// unsigned word of its size, whatever the type.
#ifndef ONNXKIT_RUNNER_ELEMENT_WORD_H_
#define ONNXKIT_RUNNER_ELEMENT_WORD_H_

#include <cstdint>

#include "lib/base/data_type.h"
#include "lib/io/proto.h"

namespace onnxkit::runner {

// Calls fn(W{}) with W the unsigned integer type of `dtype`'s element size
// (1, 2, 4 or 8 bytes) and returns true; false, without calling fn, for
// strings, complex numbers and packed sub-byte types.
template <typename F>
bool VisitElementWord(int32_t dtype, F&& fn) {
  if (dtype == pb::kString || dtype == 14 || dtype == 15) return false;  // strings, complex64/128
  switch (DataTypeBits(dtype)) {
    case 8: fn(uint8_t{}); return true;
    case 16: fn(uint16_t{}); return true;
    case 32: fn(uint32_t{}); return true;
    case 64: fn(uint64_t{}); return true;
    default: return false;
  }
}

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_ELEMENT_WORD_H_

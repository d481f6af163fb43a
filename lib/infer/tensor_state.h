// The inference state of a constant tensor (initializer, Constant value):
// its type and shape from dims and data_type, and its contents when small.
#ifndef ONNXKIT_LIB_INFER_TENSOR_STATE_H_
#define ONNXKIT_LIB_INFER_TENSOR_STATE_H_

#include "lib/infer/types.h"
#include "lib/io/proto.h"

namespace onnxkit::infer {

// Type tensor(data_type) with the tensor's dims (a negative dim unknown, a
// rank above limits::kMaxRank unknown) and, for at most kMaxDataElements
// inline elements, the contents: integers and bool in `data`, float and
// double in `float_data`. Malformed data is left unknown, never an error.
ValueState StateFromTensor(const pb::TensorProto& tensor);

// The type of a sparse initializer as nodes read it: a dense tensor of the
// values' element type with the sparse tensor's dims.
ValueState StateFromSparseTensor(const pb::SparseTensorProto& tensor);

}  // namespace onnxkit::infer

#endif  // ONNXKIT_LIB_INFER_TENSOR_STATE_H_

// Runner tensors for tests: built from value lists, read back as vectors.
//
//   runner::Tensor x = Floats({2, 2}, {1, 2, 3, 4});
//   EXPECT_EQ(Values<float>(y), (std::vector<float>{...}));
#ifndef ONNXKIT_TESTS_UTIL_TENSORS_H_
#define ONNXKIT_TESTS_UTIL_TENSORS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/proto.h"
#include "runner/tensor.h"

namespace onnxkit::testing {

// A tensor of `dtype` and `shape` holding `values` (their count must match;
// no values at all gives zeros).
template <typename T>
runner::Tensor MakeTensor(int32_t dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  absl::StatusOr<runner::Tensor> t = runner::Tensor::Allocate(dtype, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return runner::Tensor();
  if (!values.empty()) {
    EXPECT_EQ(t->size(), static_cast<int64_t>(values.size()));
  }
  const size_t n = std::min(values.size(), static_cast<size_t>(t->size()));
  for (size_t i = 0; i < n; ++i) t->mutable_data<T>()[i] = values[i];
  return *std::move(t);
}

inline runner::Tensor Floats(std::vector<int64_t> shape, const std::vector<float>& v) {
  return MakeTensor<float>(pb::kFloat, std::move(shape), v);
}
inline runner::Tensor Int64s(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  return MakeTensor<int64_t>(pb::kInt64, std::move(shape), v);
}
inline runner::Tensor Int32s(std::vector<int64_t> shape, const std::vector<int32_t>& v) {
  return MakeTensor<int32_t>(pb::kInt32, std::move(shape), v);
}
inline runner::Tensor Uint8s(std::vector<int64_t> shape, const std::vector<uint8_t>& v) {
  return MakeTensor<uint8_t>(pb::kUint8, std::move(shape), v);
}
inline runner::Tensor Int8s(std::vector<int64_t> shape, const std::vector<int8_t>& v) {
  return MakeTensor<int8_t>(pb::kInt8, std::move(shape), v);
}
inline runner::Tensor Bools(std::vector<int64_t> shape, const std::vector<bool>& v) {
  return MakeTensor<uint8_t>(pb::kBool, std::move(shape), std::vector<uint8_t>(v.begin(), v.end()));
}
inline runner::Tensor Strings(std::vector<int64_t> shape, std::vector<std::string> v) {
  absl::StatusOr<runner::Tensor> t = runner::Tensor::Strings(std::move(shape), std::move(v));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : runner::Tensor();
}
// Scalars (rank 0).
inline runner::Tensor Int64Scalar(int64_t v) { return Int64s({}, {v}); }
inline runner::Tensor BoolScalar(bool v) { return Bools({}, {v}); }

// The elements of a tensor of a fixed-size type.
template <typename T>
std::vector<T> Values(const runner::Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.size());
}

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_UTIL_TENSORS_H_

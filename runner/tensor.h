// Runtime tensors of the runner.
//
// A Tensor is an element type (TensorProto.DataType), a shape and a shared,
// immutable-by-convention buffer laid out exactly like ONNX raw_data:
// little-endian, row-major, sub-byte types (int4, uint4, float4e2m1, int2,
// uint2) packed low bits first, bool one byte, float16/bfloat16/float8 as
// their bit patterns. String tensors hold std::strings instead of bytes.
// Kernels only write tensors they allocated; inputs are read-only.
#ifndef ONNXKIT_RUNNER_TENSOR_H_
#define ONNXKIT_RUNNER_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace onnxkit::runner {

// Which memory a buffer's bytes are in. Only host bytes may be read or
// written by the host; device buffers are handled by their backend.
enum class MemoryKind { kHost, kCuda };

// Where a tensor's bytes live: owned and 64-byte aligned, or a view into
// memory kept alive by `keepalive` (a mapped model file), or memory of a
// device backend released by its own function.
class Buffer {
 public:
  // Zero-filled, 64-byte aligned; nullptr-free even for 0 bytes.
  static std::shared_ptr<Buffer> Allocate(size_t bytes, bool zero_fill = true);
  static std::shared_ptr<Buffer> View(std::shared_ptr<const void> keepalive, const void* data, size_t bytes);
  // Takes `data` (of `kind`), handed to `release` when the buffer dies.
  static std::shared_ptr<Buffer> Adopt(void* data, size_t bytes, MemoryKind kind,
                                       std::function<void(void*)> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return size_; }
  // True for memory this buffer allocated (not a view of a mapped file).
  bool owned() const { return owned_; }
  MemoryKind kind() const { return kind_; }

 private:
  Buffer() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  size_t block_ = 0;  // bytes of the owned block (capacity_ rounded up)
  bool owned_ = false;
  MemoryKind kind_ = MemoryKind::kHost;
  std::shared_ptr<const void> keepalive_;
  std::function<void(void*)> release_;
};

class Tensor {
 public:
  Tensor() = default;

  // A zero-filled tensor. Fails (ResourceExhausted/InvalidArgument) on a
  // negative dim, an element-count or byte-size overflow, or an unknown type.
  static absl::StatusOr<Tensor> Allocate(int32_t dtype, std::vector<int64_t> shape);
  // The same, left uninitialized: for writers that set every element.
  static absl::StatusOr<Tensor> AllocateUninitialized(int32_t dtype, std::vector<int64_t> shape);
  // A tensor over existing bytes (no copy); `buffer` must hold nbytes.
  static absl::StatusOr<Tensor> Wrap(int32_t dtype, std::vector<int64_t> shape, std::shared_ptr<Buffer> buffer);
  // A string tensor.
  static absl::StatusOr<Tensor> Strings(std::vector<int64_t> shape, std::vector<std::string> values);
  // A scalar (rank 0) of a fixed-size type T matching dtype.
  template <typename T>
  static Tensor Scalar(int32_t dtype, T value);

  bool defined() const { return dtype_ != 0; }
  int32_t dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t size() const { return size_; }  // element count
  size_t nbytes() const { return buffer_ ? buffer_->size() : 0; }
  bool is_string() const { return strings_ != nullptr; }
  // True when the bytes are in a device's memory (not readable here).
  bool on_device() const { return buffer_ != nullptr && buffer_->kind() != MemoryKind::kHost; }

  template <typename T>
  const T* data() const {
    return static_cast<const T*>(buffer_->data());
  }
  // Mutable data: only for tensors this kernel allocated.
  template <typename T>
  T* mutable_data() {
    return static_cast<T*>(buffer_->data());
  }
  const void* raw() const { return buffer_ ? buffer_->data() : nullptr; }
  void* mutable_raw() { return buffer_ ? buffer_->data() : nullptr; }
  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(raw()), nbytes()};
  }

  const std::vector<std::string>& strings() const { return *strings_; }
  std::vector<std::string>& mutable_strings() { return *strings_; }

  // The same data with another shape of equal element count (no copy).
  absl::StatusOr<Tensor> Reshaped(std::vector<int64_t> shape) const;
  // A deep copy (own buffer).
  Tensor Clone() const;

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

 private:
  static absl::StatusOr<Tensor> AllocateImpl(int32_t dtype, std::vector<int64_t> shape, bool zero_fill);

  int32_t dtype_ = 0;
  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  std::shared_ptr<Buffer> buffer_;
  std::shared_ptr<std::vector<std::string>> strings_;
};

// Sets the process-wide cap on bytes held by owned tensor buffers (0: none).
// Allocations beyond it fail with ResourceExhausted instead of exhausting
// the machine.
void SetMemoryLimit(int64_t bytes);
// Bytes currently held by owned tensor buffers, and the peak since start.
int64_t LiveTensorBytes();
int64_t PeakTensorBytes();

// "float[1, 3, 224, 224]"
std::string DescribeTensor(const Tensor& t);

template <typename T>
Tensor Tensor::Scalar(int32_t dtype, T value) {
  Tensor t;
  t.dtype_ = dtype;
  t.size_ = 1;
  t.buffer_ = Buffer::Allocate(sizeof(T));
  if (t.buffer_ == nullptr) return Tensor();  // over the memory limit: undefined
  *static_cast<T*>(t.buffer_->data()) = value;
  return t;
}

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_TENSOR_H_

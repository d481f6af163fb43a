// RtValue: what flows along a graph edge at run time — a tensor, a sequence
// of values, an optional (empty or holding a value), or a map (keys tensor +
// values sequence), as ONNX's type system allows.
#ifndef ONNXKIT_RUNNER_VALUE_H_
#define ONNXKIT_RUNNER_VALUE_H_

#include <memory>
#include <vector>

#include "runner/tensor.h"

namespace onnxkit::runner {

class RtValue {
 public:
  enum class Kind { kEmpty, kTensor, kSequence, kOptional, kMap };

  // Something a kernel derived from this value for the kernels that read it
  // after it in the same run (the cpu backend's copy of a tensor in the
  // memory layout several of its convolutions read).
  // `kind` tells its class apart from other kinds' (the address of an
  // object of the deriving code's own).
  class Derived {
   public:
    explicit Derived(const void* kind) : kind_(kind) {}
    virtual ~Derived() = default;
    const void* kind() const { return kind_; }

   private:
    const void* kind_;
  };

  RtValue() = default;
  // A copy holds the same tensor (or elements) but none of the derived
  // things: they belong to the value object the run keeps.
  RtValue(const RtValue& other)
      : kind_(other.kind_),
        tensor_(other.tensor_),
        elements_(other.elements_),
        elem_dtype_(other.elem_dtype_) {}
  RtValue& operator=(const RtValue& other) {
    if (this != &other) {
      kind_ = other.kind_;
      tensor_ = other.tensor_;
      elements_ = other.elements_;
      elem_dtype_ = other.elem_dtype_;
      derived_.clear();
    }
    return *this;
  }
  RtValue(RtValue&&) = default;
  RtValue& operator=(RtValue&&) = default;

  static RtValue FromTensor(Tensor t) {
    RtValue v;
    v.kind_ = Kind::kTensor;
    v.tensor_ = std::move(t);
    return v;
  }
  // A sequence; `elem_type` is the TypeProto-level element description used
  // when the sequence is empty (a TensorProto data type, 0 if unknown).
  static RtValue FromSequence(std::vector<RtValue> elements, int32_t elem_dtype = 0) {
    RtValue v;
    v.kind_ = Kind::kSequence;
    v.elements_ = std::make_shared<std::vector<RtValue>>(std::move(elements));
    v.elem_dtype_ = elem_dtype;
    return v;
  }
  // An optional holding `inner`.
  static RtValue Some(RtValue inner) {
    RtValue v;
    v.kind_ = Kind::kOptional;
    v.elements_ = std::make_shared<std::vector<RtValue>>();
    v.elements_->push_back(std::move(inner));
    return v;
  }
  // An empty optional.
  static RtValue None() {
    RtValue v;
    v.kind_ = Kind::kOptional;
    return v;
  }
  static RtValue FromMap(Tensor keys, RtValue values) {
    RtValue v;
    v.kind_ = Kind::kMap;
    v.tensor_ = std::move(keys);
    v.elements_ = std::make_shared<std::vector<RtValue>>();
    v.elements_->push_back(std::move(values));
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_optional() const { return kind_ == Kind::kOptional; }
  bool is_map() const { return kind_ == Kind::kMap; }
  bool defined() const { return kind_ != Kind::kEmpty; }

  const Tensor& tensor() const { return tensor_; }
  // (Drops what was derived from the tensor.)
  Tensor& mutable_tensor() {
    derived_.clear();
    return tensor_;
  }
  // Sequence elements.
  const std::vector<RtValue>& elements() const { return *elements_; }
  int32_t elem_dtype() const { return elem_dtype_; }
  // Optional: whether it holds a value, and the value.
  bool has_value() const { return kind_ == Kind::kOptional && elements_ && !elements_->empty(); }
  const RtValue& value() const { return (*elements_)[0]; }
  // Map: keys tensor and values sequence.
  const Tensor& map_keys() const { return tensor_; }
  const RtValue& map_values() const { return (*elements_)[0]; }

  // What kernels derived from this value so far in the run, oldest first.
  // Kept with the value (logically const: the value itself is unchanged);
  // a kernel adds only what is computed from the value as it is now.
  const std::vector<std::shared_ptr<const Derived>>& derived() const { return derived_; }
  void AddDerived(std::shared_ptr<const Derived> d) const { derived_.push_back(std::move(d)); }

 private:
  Kind kind_ = Kind::kEmpty;
  Tensor tensor_;
  std::shared_ptr<std::vector<RtValue>> elements_;
  int32_t elem_dtype_ = 0;
  mutable std::vector<std::shared_ptr<const Derived>> derived_;
};

}  // namespace onnxkit::runner

#endif  // ONNXKIT_RUNNER_VALUE_H_

// Box<T>: an optional, heap-allocated T with value semantics (deep copy).
// Used for singular sub-messages of the protobuf mirror, which may be
// recursive (a graph inside an attribute inside a graph).
#ifndef ONNXKIT_LIB_IO_BOX_H_
#define ONNXKIT_LIB_IO_BOX_H_

#include <memory>
#include <utility>

namespace onnxkit {

template <typename T>
class Box {
 public:
  Box() = default;
  Box(const Box& other) : p_(other.p_ ? std::make_unique<T>(*other.p_) : nullptr) {}
  Box(Box&&) noexcept = default;
  Box& operator=(const Box& other) {
    if (this != &other) p_ = other.p_ ? std::make_unique<T>(*other.p_) : nullptr;
    return *this;
  }
  Box& operator=(Box&&) noexcept = default;
  Box& operator=(T value) {
    p_ = std::make_unique<T>(std::move(value));
    return *this;
  }

  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return p_ != nullptr; }
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }
  T* get() { return p_.get(); }
  const T* get() const { return p_.get(); }
  // Returns the value, creating a default one first if absent.
  T& mutable_value() {
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }
  void reset() { p_.reset(); }

 private:
  std::unique_ptr<T> p_;
};

}  // namespace onnxkit

#endif  // ONNXKIT_LIB_IO_BOX_H_

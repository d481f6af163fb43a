// Bytes: an immutable byte range that either owns its storage or views a
// shared, read-only mapping of a file (kept alive by reference counting).
//
// Tensor raw data decoded from a memory-mapped model is a view: decoding does
// not touch the weight pages, and copying a Bytes never copies the data.
#ifndef ONNXKIT_LIB_IO_BYTES_H_
#define ONNXKIT_LIB_IO_BYTES_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace onnxkit {

class Bytes {
 public:
  Bytes() = default;

  // Takes ownership of `data`.
  static Bytes Own(std::string data) {
    auto owned = std::make_shared<const std::string>(std::move(data));
    Bytes b;
    b.data_ = owned->data();
    b.size_ = owned->size();
    b.keepalive_ = std::move(owned);
    return b;
  }
  // Copies `data`.
  static Bytes Copy(std::string_view data) { return Own(std::string(data)); }
  // Views [data, data+size) which `keepalive` keeps valid.
  static Bytes View(std::shared_ptr<const void> keepalive, const char* data, size_t size) {
    Bytes b;
    b.keepalive_ = std::move(keepalive);
    b.data_ = data;
    b.size_ = size;
    return b;
  }

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return std::string_view(data_ == nullptr ? "" : data_, size_); }
  std::string str() const { return std::string(view()); }
  // The storage this range keeps alive (a file mapping or an owned string).
  const std::shared_ptr<const void>& keepalive() const { return keepalive_; }

  friend bool operator==(const Bytes& a, const Bytes& b) { return a.view() == b.view(); }

 private:
  std::shared_ptr<const void> keepalive_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace onnxkit

#endif  // ONNXKIT_LIB_IO_BYTES_H_

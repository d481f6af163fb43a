// JsonWriter: a small streaming JSON writer with deterministic output.
//
// Keys are written in the order the caller gives them; strings are escaped
// per RFC 8259 (control characters as \u00XX; invalid UTF-8 bytes replaced
// by U+FFFD so the output is always valid JSON); non-finite doubles become
// null. Pretty-printed with two-space indentation.
//
//   JsonWriter w;
//   w.BeginObject();
//   w.Key("name"); w.String("resnet");
//   w.Key("dims"); w.BeginArray(); w.Int(1); w.Int(3); w.EndArray();
//   w.EndObject();
//   std::string text = w.Take();
#ifndef ONNXKIT_LIB_BASE_JSON_WRITER_H_
#define ONNXKIT_LIB_BASE_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace onnxkit {

class JsonWriter {
 public:
  explicit JsonWriter(bool pretty = true) : pretty_(pretty) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view value);
  void Int(int64_t value);
  void Uint(uint64_t value);
  void Double(double value);
  void Bool(bool value);
  void Null();

  // Shorthands for "key": value.
  void KeyString(std::string_view key, std::string_view value) { Key(key); String(value); }
  void KeyInt(std::string_view key, int64_t value) { Key(key); Int(value); }
  void KeyBool(std::string_view key, bool value) { Key(key); Bool(value); }
  void KeyDouble(std::string_view key, double value) { Key(key); Double(value); }

  // The text written so far (with a trailing newline once complete).
  std::string Take();

  // `s` as a quoted, escaped JSON string.
  static std::string Quote(std::string_view s);

 private:
  void BeforeValue();
  void Newline();

  std::string out_;
  // One entry per open container: number of values written in it.
  std::vector<int> counts_;
  bool pretty_;
  bool after_key_ = false;
};

}  // namespace onnxkit

#endif  // ONNXKIT_LIB_BASE_JSON_WRITER_H_

// An independent UTF-8 validator for tests and fuzz targets that check
// onnxkit's reports (kept apart from lib/base/json_writer.cc on purpose: it is
// the oracle the writer is held against).
#ifndef ONNXKIT_TESTS_UTIL_UTF8_H_
#define ONNXKIT_TESTS_UTIL_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace onnxkit::testing {

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
inline bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (extra < 0 || s.size() - i <= static_cast<size_t>(extra)) return false;
    uint32_t cp = extra == 0 ? c : c & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_UTIL_UTF8_H_

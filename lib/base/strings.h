// Bridges between std::string_view and absl::string_view.
//
// Debian's Abseil is built with its own absl::string_view (not an alias of
// std::string_view), so absl::StrCat and friends do not accept a
// std::string_view directly: wrap it with Sv(). Status::message() returns an
// absl::string_view: use StdSv() to pass it to std APIs.
#ifndef ONNXKIT_LIB_BASE_STRINGS_H_
#define ONNXKIT_LIB_BASE_STRINGS_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace onnxkit {

inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view StdSv(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace onnxkit

#endif  // ONNXKIT_LIB_BASE_STRINGS_H_

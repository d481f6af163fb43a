// Status plumbing used everywhere in onnxkit.
//
// ONNXKIT_RETURN_IF_ERROR(expr)      returns the status of `expr` when it is not OK.
// ONNXKIT_ASSIGN_OR_RETURN(lhs, rexpr) evaluates a StatusOr, returns its status on
//                                     error, otherwise moves the value into `lhs`.
// AnnotateStatus(status, context)    prepends "context: " to the message, keeping
//                                     the code, so errors gain context on the way up
//                                     (not when the message starts with it already).
#ifndef ONNXKIT_LIB_BASE_STATUS_MACROS_H_
#define ONNXKIT_LIB_BASE_STATUS_MACROS_H_

#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace onnxkit {

// Returns `status` with `context` prepended to its message; OK stays OK.
absl::Status AnnotateStatus(const absl::Status& status, std::string_view context);

}  // namespace onnxkit

#define ONNXKIT_RETURN_IF_ERROR(expr)                                  \
  do {                                                                 \
    ::absl::Status onnxkit_status_ = (expr);                           \
    if (!onnxkit_status_.ok()) return onnxkit_status_;                 \
  } while (0)

#define ONNXKIT_STATUS_CONCAT_INNER_(a, b) a##b
#define ONNXKIT_STATUS_CONCAT_(a, b) ONNXKIT_STATUS_CONCAT_INNER_(a, b)

#define ONNXKIT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                   \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(*tmp)

#define ONNXKIT_ASSIGN_OR_RETURN(lhs, rexpr) \
  ONNXKIT_ASSIGN_OR_RETURN_IMPL_(            \
      ONNXKIT_STATUS_CONCAT_(onnxkit_statusor_, __LINE__), lhs, rexpr)

// Like ONNXKIT_RETURN_IF_ERROR, but prepends `context` (a string expression)
// to the message of a failing status.
#define ONNXKIT_RETURN_IF_ERROR_CTX(expr, context)                         \
  do {                                                                     \
    ::absl::Status onnxkit_status_ = (expr);                               \
    if (!onnxkit_status_.ok())                                             \
      return ::onnxkit::AnnotateStatus(onnxkit_status_, (context));        \
  } while (0)

#endif  // ONNXKIT_LIB_BASE_STATUS_MACROS_H_

// AnnotateStatus: context prepended once, code and payloads kept.
#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "lib/base/status_macros.h"
#include "lib/base/usage_error.h"

namespace onnxkit {
namespace {

TEST(AnnotateStatusTest, PrependsContextAndKeepsTheCode) {
  absl::Status s = AnnotateStatus(absl::NotFoundError("cannot open"), "m.onnx");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "m.onnx: cannot open");
  EXPECT_TRUE(AnnotateStatus(absl::OkStatus(), "m.onnx").ok());
  EXPECT_EQ(AnnotateStatus(absl::InternalError("x"), "").message(), "x");
}

TEST(AnnotateStatusTest, ContextTheMessageStartsWithIsNotRepeated) {
  absl::Status once = AnnotateStatus(absl::NotFoundError("m.onnx: cannot open"), "m.onnx");
  EXPECT_EQ(once.message(), "m.onnx: cannot open");
  // Only a whole "context: " prefix counts.
  EXPECT_EQ(AnnotateStatus(absl::NotFoundError("m.onnx.data: cannot open"), "m.onnx").message(),
            "m.onnx: m.onnx.data: cannot open");
  EXPECT_EQ(AnnotateStatus(absl::NotFoundError("m.onnx"), "m.onnx").message(), "m.onnx: m.onnx");
}

TEST(AnnotateStatusTest, KeepsTheUsagePayload) {
  absl::Status s = AnnotateStatus(UsageError("--x is bad"), "m.onnx");
  EXPECT_TRUE(IsUsageError(s));
}

}  // namespace
}  // namespace onnxkit

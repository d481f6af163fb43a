// SpillFile: records appended to one scratch file come back byte for byte.
#include "lib/io/spill_file.h"

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_paths.h"

namespace onnxkit::io {
namespace {

using ::testing::HasSubstr;

TEST(SpillFileTest, RecordsComeBackAtTheirSpans) {
  const std::filesystem::path path = ::onnxkit::testing::MakeTempDir() / "values.bin";
  SpillFile spill;
  ASSERT_TRUE(spill.Create(path).ok());
  const std::string big(1 << 20, 'x');
  std::string with_zeros("a\0b\0", 4);
  auto first = spill.Append("first");
  auto empty = spill.Append("");
  auto second = spill.Append(with_zeros);
  auto third = spill.Append(big);
  ASSERT_TRUE(first.ok() && empty.ok() && second.ok() && third.ok());
  EXPECT_EQ(second->offset, 5u);
  EXPECT_EQ(spill.size(), 9u + big.size());
  // Read in any order, again and again.
  EXPECT_EQ(*spill.Read(*third), big);
  EXPECT_EQ(*spill.Read(*second), with_zeros);
  EXPECT_EQ(*spill.Read(*first), "first");
  EXPECT_EQ(*spill.Read(*empty), "");
  EXPECT_EQ(*spill.Read(*first), "first");
  EXPECT_EQ(std::filesystem::file_size(path), spill.size());
}

TEST(SpillFileTest, ErrorsAreStatuses) {
  const std::filesystem::path dir = ::onnxkit::testing::MakeTempDir();
  SpillFile closed;
  EXPECT_EQ(closed.Append("x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(closed.Read({0, 0}).status().code(), absl::StatusCode::kFailedPrecondition);
  SpillFile spill;
  ASSERT_TRUE(spill.Create(dir / "a.bin").ok());
  ASSERT_TRUE(spill.Append("abc").ok());
  // A span past the end, or one whose end overflows, is refused.
  for (SpillFile::Span bad : {SpillFile::Span{2, 2}, SpillFile::Span{4, 0}, SpillFile::Span{1, ~uint64_t{0}}}) {
    absl::StatusOr<std::string> r = spill.Read(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << bad.offset << " " << bad.size;
  }
  EXPECT_EQ(*spill.Read({1, 2}), "bc");
  // An existing file is not taken over; a second Create is refused.
  SpillFile other;
  absl::Status exists = other.Create(dir / "a.bin");
  EXPECT_FALSE(exists.ok());
  EXPECT_THAT(std::string(exists.message()), HasSubstr("a.bin"));
  EXPECT_EQ(spill.Create(dir / "b.bin").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(other.Create(dir / "missing" / "c.bin").ok());
}

}  // namespace
}  // namespace onnxkit::io

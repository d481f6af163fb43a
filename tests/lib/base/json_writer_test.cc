// JSON string quoting: escapes, and invalid UTF-8 (from names in hostile
// files) replaced by U+FFFD so that reports are always valid JSON.
#include "lib/base/json_writer.h"

#include "gtest/gtest.h"

namespace onnxkit {
namespace {

TEST(JsonWriterTest, EscapesControlCharactersAndQuotes) {
  EXPECT_EQ(JsonWriter::Quote("a\"b\\c\n\t\x01"), "\"a\\\"b\\\\c\\n\\t\\u0001\"");
}

TEST(JsonWriterTest, KeepsValidUtf8) {
  EXPECT_EQ(JsonWriter::Quote("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"");
}

TEST(JsonWriterTest, ReplacesInvalidUtf8) {
  const std::string kBad = "\xEF\xBF\xBD";
  // A stray continuation byte, a truncated sequence.
  EXPECT_EQ(JsonWriter::Quote("\x80"), "\"" + kBad + "\"");
  EXPECT_EQ(JsonWriter::Quote("\xE2\x82"), "\"" + kBad + kBad + "\"");
  // Overlong forms of NUL and '/', found by the check fuzzer in a name.
  EXPECT_EQ(JsonWriter::Quote("\xC0\x80"), "\"" + kBad + kBad + "\"");
  EXPECT_EQ(JsonWriter::Quote("\xE0\x80\xAF"), "\"" + kBad + kBad + kBad + "\"");
  // A UTF-16 surrogate and a code point beyond U+10FFFF.
  EXPECT_EQ(JsonWriter::Quote("\xED\xA0\x80"), "\"" + kBad + kBad + kBad + "\"");
  EXPECT_EQ(JsonWriter::Quote("\xF4\x90\x80\x80"), "\"" + kBad + kBad + kBad + kBad + "\"");
}

}  // namespace
}  // namespace onnxkit

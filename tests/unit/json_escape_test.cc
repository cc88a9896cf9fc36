// JSON string escaping shared by the server and `sluice simulate` (src/util/json_escape.h).
#include "util/json_escape.h"

#include <string>

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(JsonEscape, QuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(json_escape(R"(say "hi" \ bye)"), R"(say \"hi\" \\ bye)");
}

TEST(JsonEscape, NewlineReturnAndTabGetTheirShortForms) {
  EXPECT_EQ(json_escape("a\nb\rc\td"), R"(a\nb\rc\td)");
}

TEST(JsonEscape, OtherControlCharactersBecomeUnicodeEscapes) {
  EXPECT_EQ(json_escape(std::string("\x00\x01\x08\x0c\x1b\x1f", 6)),
            R"(\u0000\u0001\u0008\u000c\u001b\u001f)");
}

TEST(JsonEscape, SpaceDelAndPrintableAsciiPassThrough) {
  EXPECT_EQ(json_escape(" ~/\x7f"), " ~/\x7f");
}

TEST(JsonEscape, NonAsciiUtf8PassesThroughUnchanged) {
  const std::string text = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\xb0";  // café 日本 🚰
  EXPECT_EQ(json_escape(text), text);
}

TEST(JsonEscape, AppendsAfterWhatIsThere) {
  std::string out = "\"";
  append_json_escaped("a\"b", out);
  EXPECT_EQ(out, R"("a\"b)");
  EXPECT_EQ(json_escape(""), "");
}

}  // namespace
}  // namespace sluice

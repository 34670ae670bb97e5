// UTF-8 helpers and clip_input, the one way client values are quoted back.
#include <gtest/gtest.h>

#include "ragd/common/echo.h"
#include "ragd/common/utf8.h"

namespace ragd {
namespace {

TEST(Utf8, ValidationBoundariesAndLength) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € U+1F600: 1 + 2 + 3 + 4 bytes
  EXPECT_EQ(find_invalid_utf8(s), std::string_view::npos);
  EXPECT_EQ(utf8_length(s), 4u);
  EXPECT_EQ(utf8_sequence_length(s, 3), 3u);
  EXPECT_EQ(utf8_floor(s, 2), 1u);  // inside é: back to its first byte
  EXPECT_EQ(utf8_floor(s, 7), 6u);
  EXPECT_EQ(find_invalid_utf8("ok\xC3"), 2u);               // truncated
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);             // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);        // a surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);     // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\x80"), 0u);                 // a stray continuation byte
}

TEST(Echo, ClipsOnACharacterBoundaryAndSaysHowLong) {
  EXPECT_EQ(clip_input("short"), "short");
  EXPECT_EQ(clip_input(std::string(kEchoMaxBytes, 'a')), std::string(kEchoMaxBytes, 'a'));
  std::string v = "a";
  while (v.size() < 1000) v += "\xC3\xA9";  // byte 128 is the second byte of an é
  const std::string c = clip_input(v);
  EXPECT_EQ(c, v.substr(0, 127) + "\u2026(" + std::to_string(v.size()) + " bytes)");
  EXPECT_EQ(find_invalid_utf8(c), std::string_view::npos);
  EXPECT_EQ(clip_input(std::string(5000, 'z'), kEchoMessageMaxBytes).size(), kEchoMessageMaxBytes + 3 + 12);
}

}  // namespace
}  // namespace ragd

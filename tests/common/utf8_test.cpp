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
  for (int b = 0; b < 256; ++b)  // 10xxxxxx and nothing else
    EXPECT_EQ(utf8_continuation(static_cast<char>(b)), b >= 0x80 && b < 0xC0) << "byte " << b;
}

TEST(Utf8, EncodesEveryLengthClassAtItsBoundaries) {
  const struct {
    char32_t cp;
    std::string bytes;
  } cases[] = {
      {0x00, std::string(1, '\0')}, {0x41, "A"},          {0x7F, "\x7F"},
      {0x80, "\xC2\x80"},          {0x7FF, "\xDF\xBF"},   {0x800, "\xE0\xA0\x80"},
      {0xFFFD, "\xEF\xBF\xBD"},    {0xFFFF, "\xEF\xBF\xBF"}, {0x10000, "\xF0\x90\x80\x80"},
      {0x1F600, "\xF0\x9F\x98\x80"}, {0x10FFFF, "\xF4\x8F\xBF\xBF"},
  };
  for (const auto& c : cases) {
    std::string out = "x";
    append_utf8(out, c.cp);
    EXPECT_EQ(out, "x" + c.bytes) << std::hex << static_cast<uint32_t>(c.cp);
    size_t len = 0;
    EXPECT_EQ(utf8_decode_at(c.bytes, 0, &len), c.cp);
    EXPECT_EQ(len, c.bytes.size());
    EXPECT_EQ(utf8_char_len(c.bytes, 0), c.bytes.size());
  }
  // A surrogate is encoded as given (the three-byte form), and decodes as three invalid bytes.
  std::string sur;
  append_utf8(sur, 0xD800);
  EXPECT_EQ(sur, "\xED\xA0\x80");
  EXPECT_EQ(utf8_decode(sur), std::u32string(3, U'\uFFFD'));
}

TEST(Utf8, RoundTripsCodePointsOfOddLengths) {
  for (size_t n : {0u, 1u, 7u, 33u, 129u}) {
    std::u32string cps;
    uint32_t x = 12345 + static_cast<uint32_t>(n);
    for (size_t i = 0; i < n; ++i) {
      x = x * 1103515245u + 12345u;
      char32_t c = (x >> 8) % 0x110000;
      if (c >= 0xD800 && c <= 0xDFFF) c -= 0x800;  // no surrogates
      cps.push_back(i % 4 == 0 ? c % 0x80 : i % 4 == 1 ? c % 0x800 : i % 4 == 2 ? c % 0xD800 : c);
    }
    const std::string s = utf8_encode(cps);
    EXPECT_EQ(find_invalid_utf8(s), std::string_view::npos) << n;
    EXPECT_EQ(utf8_length(s), n);
    EXPECT_EQ(utf8_decode(s), cps) << n;
    EXPECT_EQ(sanitize_utf8(s), s);
  }
}

TEST(Utf8, EachInvalidByteIsOneReplacementCharacter) {
  const std::string_view bad[] = {
      "\x80",              // a stray continuation byte
      "\xBF\xBF",          // two of them
      "\xC3",              // truncated two-byte
      "\xE2\x82",          // truncated three-byte
      "\xF0\x9F\x98",      // truncated four-byte
      "\xC0\xAF",          // overlong '/'
      "\xC1\xBF",          // overlong
      "\xE0\x80\xAF",      // overlong three-byte
      "\xF0\x80\x80\xAF",  // overlong four-byte
      "\xED\xBF\xBF",      // a surrogate
      "\xF4\x90\x80\x80",  // above U+10FFFF
      "\xF5\x80\x80\x80",  // lead bytes that never occur
      "\xF8\x88\x80\x80\x80",
      "\xFE",
      "\xFF",
      "\xC3" "A",          // a lead byte followed by ASCII
  };
  for (std::string_view b : bad) {
    EXPECT_EQ(find_invalid_utf8(b), 0u) << testing::PrintToString(std::string(b));
    EXPECT_EQ(utf8_sequence_length(b, 0), 0u);
    EXPECT_EQ(utf8_char_len(b, 0), 1u);
    size_t len = 0;
    EXPECT_EQ(utf8_decode_at(b, 0, &len), U'\uFFFD');
    EXPECT_EQ(len, 1u);
    // Every byte that does not start a valid sequence becomes U+FFFD; ASCII stays.
    std::u32string want;
    std::string sanitized;
    for (char c : b) {
      const bool ascii = static_cast<unsigned char>(c) < 0x80;
      want.push_back(ascii ? static_cast<char32_t>(c) : U'\uFFFD');
      sanitized += ascii ? std::string(1, c) : std::string("\xEF\xBF\xBD");
    }
    EXPECT_EQ(utf8_decode(b), want) << testing::PrintToString(std::string(b));
    EXPECT_EQ(sanitize_utf8(b), sanitized);
  }
  // Valid characters around a bad byte are kept.
  EXPECT_EQ(utf8_decode("a\xC3\xA9\x80\xE2\x82\xAC"), U"a\u00E9\uFFFD\u20AC");
  EXPECT_EQ(sanitize_utf8("a\xC3\xA9\x80\xE2\x82\xAC"), "a\xC3\xA9\xEF\xBF\xBD\xE2\x82\xAC");
  EXPECT_EQ(utf8_decode(""), U"");
  EXPECT_EQ(utf8_encode(U""), "");
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

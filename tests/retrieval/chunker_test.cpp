#include "ragd/retrieval/chunker.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::make_text;
using testing::make_vocabulary;
using testing::WordTokenizer;

struct Fixture {
  std::vector<std::string> vocab = make_vocabulary(400, 11);
  WordTokenizer tok{vocab};
  std::vector<std::string> topic{vocab.begin(), vocab.begin() + 60};
  std::vector<std::string> common{vocab.begin() + 60, vocab.end()};
};

std::string spell(const engine::Tokenizer& tok, const std::vector<int32_t>& ids) { return tok.decode(ids); }

// Invariants every chunking must satisfy, checked against the text and a whole-text encoding.
void check_tiling(const engine::Tokenizer& tok, const std::string& text, const std::vector<Chunk>& chunks,
                  int max_tokens, bool overlapping) {
  ASSERT_FALSE(chunks.empty());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    SCOPED_TRACE("chunk " + std::to_string(i));
    EXPECT_EQ(c.index, i);
    EXPECT_EQ(c.doc_id, "doc");
    EXPECT_LE(c.token_ids.size(), static_cast<size_t>(max_tokens));
    EXPECT_EQ(c.token_ids.size(), c.token_end - c.token_begin);
    ASSERT_LE(c.byte_end, text.size());
    EXPECT_EQ(c.text, text.substr(c.byte_begin, c.byte_end - c.byte_begin));
    EXPECT_EQ(spell(tok, c.token_ids), c.text);  // token ids spell the chunk's bytes exactly
    if (i > 0 && !overlapping) {
      EXPECT_EQ(c.byte_begin, chunks[i - 1].byte_end);
      EXPECT_EQ(c.token_begin, chunks[i - 1].token_end);
    }
  }
  // First chunk starts at the first non-space byte; the last ends at the end of the text.
  EXPECT_EQ(chunks.front().byte_begin, text.find_first_not_of(" \n\t"));
  EXPECT_EQ(chunks.back().byte_end, text.size());
  if (!overlapping) {
    // Same token count as encoding the (left-trimmed) text in one go.
    EXPECT_EQ(chunks.back().token_end, tok.encode(text.substr(chunks.front().byte_begin)).size());
  }
}

TEST(Chunker, TilesTextWithinTokenBudgetOddSizes) {
  Fixture f;
  std::mt19937_64 rng(7);
  for (int max_tokens : {33, 129, 256}) {
    for (int doc = 0; doc < 5; ++doc) {
      std::string text = make_text(rng, f.topic, f.common, 1 + static_cast<int>(rng() % 9));
      ChunkerOptions o;
      o.chunk_tokens = max_tokens;
      auto ch = Chunker::create(f.tok, o);
      ASSERT_TRUE(ch.ok()) << ch.status().to_string();
      auto chunks = ch->chunk("doc", text);
      check_tiling(f.tok, text, chunks, max_tokens, false);
    }
  }
}

// Sections (headings): chunks tile each section on its own, never straddle a boundary, and carry
// the section's path; text before the first section gets an empty path.
TEST(Chunker, ChunksEachSectionOnItsOwnWithItsPath) {
  Fixture f;
  std::mt19937_64 rng(23);
  for (int max_tokens : {17, 64, 200}) {
    for (int doc = 0; doc < 6; ++doc) {
      std::string text = make_text(rng, f.topic, f.common, 3 + static_cast<int>(rng() % 8));
      // Cut at a random subset of paragraph starts.
      std::vector<uint64_t> cuts;
      for (size_t p = text.find("\n\n"); p != std::string::npos; p = text.find("\n\n", p + 2)) {
        size_t start = text.find_first_not_of(" \n\t", p);
        if (start != std::string::npos && rng() % 2) cuts.push_back(start);
      }
      std::vector<Section> sections;
      for (size_t i = 0; i < cuts.size(); ++i) {
        Section s;
        s.path = {"h" + std::to_string(doc), "sub " + std::to_string(i)};
        s.byte_begin = cuts[i];
        s.byte_end = i + 1 < cuts.size() ? cuts[i + 1] : text.size();
        sections.push_back(std::move(s));
      }
      ChunkerOptions o;
      o.chunk_tokens = max_tokens;
      o.overlap_tokens = max_tokens / 4;
      auto ch = Chunker::create(f.tok, o);
      ASSERT_TRUE(ch.ok());
      auto chunks = ch->chunk("doc", text, sections);
      ASSERT_FALSE(chunks.empty());
      size_t covered_to = 0;
      for (size_t i = 0; i < chunks.size(); ++i) {
        const Chunk& c = chunks[i];
        SCOPED_TRACE("max " + std::to_string(max_tokens) + " doc " + std::to_string(doc) + " chunk " + std::to_string(i));
        EXPECT_EQ(c.index, i);
        EXPECT_LE(c.token_ids.size(), static_cast<size_t>(max_tokens));
        EXPECT_EQ(c.text, text.substr(c.byte_begin, c.byte_end - c.byte_begin));
        EXPECT_EQ(spell(f.tok, c.token_ids), c.text);
        EXPECT_EQ(c.token_ids.size(), c.token_end - c.token_begin);
        // the section that holds the chunk's first byte holds all of it
        const Section* home = nullptr;
        for (const auto& s : sections)
          if (c.byte_begin >= s.byte_begin && c.byte_begin < s.byte_end) home = &s;
        if (home) {
          EXPECT_LE(c.byte_end, home->byte_end);
          EXPECT_EQ(c.section, home->path);
        } else {
          EXPECT_TRUE(c.section.empty());
          if (!sections.empty()) EXPECT_LE(c.byte_end, sections.front().byte_begin);
        }
        if (i > 0) {
          EXPECT_LE(chunks[i - 1].token_begin, c.token_begin);
          EXPECT_LE(chunks[i - 1].byte_begin, c.byte_begin);
        }
        covered_to = std::max<size_t>(covered_to, c.byte_end);
      }
      EXPECT_EQ(covered_to, text.size());
      // every section's first byte starts a chunk
      for (const auto& s : sections)
        EXPECT_TRUE(std::any_of(chunks.begin(), chunks.end(), [&](const Chunk& c) { return c.byte_begin == s.byte_begin; }))
            << "section at " << s.byte_begin;
    }
  }
}

TEST(Chunker, IgnoresSectionsOutOfOrderOrRange) {
  Fixture f;
  std::mt19937_64 rng(5);
  std::string text = make_text(rng, f.topic, f.common, 4);
  auto ch = Chunker::create(f.tok, {});
  ASSERT_TRUE(ch.ok());
  std::vector<Section> bad = {{{"b"}, 10, 20}, {{"a"}, 0, 5}};
  auto plain = ch->chunk("doc", text);
  auto got = ch->chunk("doc", text, bad);
  ASSERT_EQ(got.size(), plain.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].byte_begin, plain[i].byte_begin);
    EXPECT_TRUE(got[i].section.empty());
  }
  std::vector<Section> past_end = {{{"x"}, 0, text.size() + 1}};
  EXPECT_TRUE(ch->chunk("doc", text, past_end).front().section.empty());
}

TEST(Chunker, BreaksAtSentenceEnds) {
  Fixture f;
  std::mt19937_64 rng(8);
  std::string text = make_text(rng, f.topic, f.common, 12);
  ChunkerOptions o;
  o.chunk_tokens = 65;
  auto chunks = Chunker::create(f.tok, o)->chunk("doc", text);
  ASSERT_GT(chunks.size(), 3u);
  for (const auto& c : chunks) {
    std::string t = c.text;
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    ASSERT_FALSE(t.empty());
    EXPECT_TRUE(t.back() == '.' || t.back() == '?') << "chunk ends mid-sentence: ..." << t.substr(t.size() - 20);
  }
}

TEST(Chunker, PrefersParagraphBreaks) {
  Fixture f;
  // Paragraphs of two 10-word sentences (24 tokens with the blank line). With 63-token chunks,
  // greedy sentence packing would take two paragraphs plus half of the third (59 tokens); the
  // chunker breaks between paragraphs instead.
  std::mt19937_64 rng(9);
  std::string text;
  for (int p = 0; p < 9; ++p) {
    for (int s = 0; s < 2; ++s) {
      for (int w = 0; w < 10; ++w) text += f.topic[rng() % f.topic.size()] + (w < 9 ? " " : "");
      text += s == 0 ? ". " : ".";
    }
    text += "\n\n";
  }
  ChunkerOptions o;
  o.chunk_tokens = 63;
  auto chunks = Chunker::create(f.tok, o)->chunk("doc", text);
  check_tiling(f.tok, text, chunks, 63, false);
  ASSERT_GE(chunks.size(), 4u);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].text.back(), '.');
    EXPECT_EQ(chunks[i + 1].text.substr(0, 2), "\n\n") << "chunk " << i + 1 << " does not start a paragraph";
  }
}

TEST(Chunker, OverlapRepeatsTrailingSentences) {
  Fixture f;
  std::mt19937_64 rng(10);
  std::string text = make_text(rng, f.topic, f.common, 10);
  ChunkerOptions o;
  o.chunk_tokens = 97;
  o.overlap_tokens = 30;
  auto chunks = Chunker::create(f.tok, o)->chunk("doc", text);
  check_tiling(f.tok, text, chunks, 97, true);
  size_t overlapped = 0;
  for (size_t i = 1; i < chunks.size(); ++i) {
    const Chunk& a = chunks[i - 1];
    const Chunk& b = chunks[i];
    EXPECT_GT(b.byte_begin, a.byte_begin);  // progress
    EXPECT_LE(b.byte_begin, a.byte_end);    // no gap
    EXPECT_LE(a.token_end - std::min(a.token_end, b.token_begin), 30u);
    if (b.token_begin < a.token_end) {
      ++overlapped;
      // the shared tokens are the same ids
      size_t shared = a.token_end - b.token_begin;
      std::vector<int32_t> tail(a.token_ids.end() - static_cast<long>(shared), a.token_ids.end());
      std::vector<int32_t> head(b.token_ids.begin(), b.token_ids.begin() + static_cast<long>(shared));
      EXPECT_EQ(tail, head);
    }
  }
  EXPECT_GT(overlapped, chunks.size() / 2);
}

TEST(Chunker, SplitsAWordLongerThanAChunk) {
  Fixture f;
  std::string word(777, 'q');  // not in the vocabulary: one token per byte
  std::string text = "Short start. " + word + " tail words here.";
  ChunkerOptions o;
  o.chunk_tokens = 129;
  auto chunks = Chunker::create(f.tok, o)->chunk("doc", text);
  check_tiling(f.tok, text, chunks, 129, false);
  EXPECT_GE(chunks.size(), 777u / 129u);
}

TEST(Chunker, EmptyAndBlankTextGiveNoChunks) {
  Fixture f;
  auto ch = Chunker::create(f.tok, {});
  EXPECT_TRUE(ch->chunk("doc", "").empty());
  EXPECT_TRUE(ch->chunk("doc", " \n\n\t  ").empty());
}

TEST(Chunker, RejectsTinyChunkTokens) {
  Fixture f;
  ChunkerOptions o;
  o.chunk_tokens = 4;
  auto ch = Chunker::create(f.tok, o);
  ASSERT_FALSE(ch.ok());
  EXPECT_NE(ch.status().message().find("chunk_tokens"), std::string::npos);
}

TEST(Chunker, RejectsOverlapOfHalfAChunk) {
  Fixture f;
  ChunkerOptions o;
  o.chunk_tokens = 64;
  o.overlap_tokens = 32;
  auto ch = Chunker::create(f.tok, o);
  ASSERT_FALSE(ch.ok());
  EXPECT_NE(ch.status().message().find("overlap_tokens"), std::string::npos);
}

}  // namespace
}  // namespace ragd::retrieval

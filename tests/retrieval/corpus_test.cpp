#include "ragd/retrieval/corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include <rocksdb/db.h>

#include "ragd/common/hash.h"

#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

struct World {
  std::vector<std::string> vocab = testing::make_vocabulary(6000, 5);
  std::shared_ptr<testing::WordTokenizer> tok = std::make_shared<testing::WordTokenizer>(vocab);
  std::vector<std::string> common{vocab.begin(), vocab.begin() + 300};

  // Documents on distinct topics: each draws from its own 40 words plus shared common words.
  std::vector<Document> docs(size_t n, uint64_t seed, int paragraphs = 3) const {
    std::mt19937_64 rng(seed);
    std::vector<Document> out;
    for (size_t i = 0; i < n; ++i) {
      size_t base = 300 + (i * 40) % (vocab.size() - 340);
      std::vector<std::string> topic(vocab.begin() + static_cast<long>(base), vocab.begin() + static_cast<long>(base + 40));
      Document d;
      d.id = "doc-" + std::to_string(seed) + "-" + std::to_string(i);
      d.title = "Title " + std::to_string(i);
      d.text = testing::make_text(rng, topic, common, paragraphs);
      out.push_back(std::move(d));
    }
    return out;
  }
};

CorpusOptions small_opts() {
  CorpusOptions o;
  o.chunker.chunk_tokens = 64;
  return o;
}

// Two sentences from the middle of a document.
std::string query_from(const std::string& text) {
  size_t a = text.find(". ", text.size() / 3);
  size_t b = text.find(". ", a + 2);
  size_t c = text.find(". ", b + 2);
  if (a == std::string::npos || c == std::string::npos) return text.substr(0, 200);
  return text.substr(a + 2, c - a - 2);
}

TEST(Corpus, IngestSearchReingestReplaceRemove) {
  World w;
  TempDir dir;
  auto docs = w.docs(40, 1);
  auto c = Corpus::open(dir.path(), small_opts(), w.tok);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto& corpus = **c;
  auto s1 = corpus.ingest(docs);
  ASSERT_TRUE(s1.ok()) << s1.status().to_string();
  EXPECT_EQ(s1->ingested, 40u);
  EXPECT_GT(s1->chunks_added, 40u);
  ASSERT_TRUE(corpus.check_consistency().ok()) << corpus.check_consistency().to_string();

  auto hits = corpus.search(query_from(docs[7].text), 3, ReadScope::everything());
  ASSERT_TRUE(hits.ok()) << hits.status().to_string();
  ASSERT_FALSE(hits->empty());
  const Hit& h = (*hits)[0];
  EXPECT_EQ(h.chunk.doc_id, docs[7].id);
  EXPECT_EQ(h.source, docs[7].id);
  EXPECT_EQ(h.title, docs[7].title);
  EXPECT_EQ(h.chunk.text, docs[7].text.substr(h.chunk.byte_begin, h.chunk.byte_end - h.chunk.byte_begin));
  EXPECT_EQ(w.tok->decode(h.chunk.token_ids), h.chunk.text);
  // Dense alone: the hit's score is the embedder's similarity (hybrid scores are fused ranks).
  SearchParams dense;
  dense.mode = RetrievalMode::kDense;
  auto dh = corpus.search(query_from(docs[7].text), 3, ReadScope::everything(), dense);
  ASSERT_TRUE(dh.ok() && !dh->empty());
  EXPECT_EQ((*dh)[0].chunk.doc_id, docs[7].id);
  EXPECT_GT((*dh)[0].score, 0.2f);

  // Unchanged: nothing written.
  uint64_t seq = corpus.stats().seq;
  auto s2 = corpus.ingest(docs);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->unchanged, 40u);
  EXPECT_EQ(s2->ingested + s2->replaced, 0u);
  EXPECT_EQ(corpus.stats().seq, seq);

  // Changed: chunks replaced, old chunk ids gone.
  auto old = *corpus.get_document(docs[7].id);
  ASSERT_TRUE(old.has_value());
  Document changed = docs[7];
  changed.text = w.docs(1, 99)[0].text;
  auto s3 = corpus.ingest(std::span<const Document>(&changed, 1));
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->replaced, 1u);
  EXPECT_EQ(s3->chunks_removed, old->chunk_ids.size());
  auto gone = corpus.get_chunks(old->chunk_ids);
  for (const auto& g : *gone) EXPECT_FALSE(g.has_value());
  auto h2 = corpus.search(query_from(changed.text), 1, ReadScope::everything());
  EXPECT_EQ((*h2)[0].chunk.doc_id, docs[7].id);
  for (uint64_t id : old->chunk_ids) EXPECT_NE((*h2)[0].chunk.id, id);
  ASSERT_TRUE(corpus.check_consistency().ok());

  // Remove: document, chunks and vectors gone.
  auto cur = *corpus.get_document(docs[7].id);
  auto removed = corpus.remove_document(docs[7].id);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(corpus.get_document(docs[7].id)->has_value());
  EXPECT_FALSE(*corpus.remove_document(docs[7].id));
  auto gone2 = corpus.get_chunks(cur->chunk_ids);
  ASSERT_TRUE(gone2.ok());
  for (const auto& g : *gone2) EXPECT_FALSE(g.has_value());
  auto h3 = corpus.search(query_from(changed.text), 5, ReadScope::everything());
  for (const auto& hit : *h3) EXPECT_NE(hit.chunk.doc_id, docs[7].id);
  ASSERT_TRUE(corpus.check_consistency().ok());
  EXPECT_EQ(corpus.stats().documents, 39u);
}

TEST(Corpus, HashingRelevanceQueryFromDocumentRanksItFirst) {
  World w;
  TempDir dir;
  auto docs = w.docs(300, 2, 4);
  auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
  ASSERT_TRUE(c->ingest(docs).ok());
  size_t first = 0;
  for (const auto& d : docs) {
    auto hits = c->search(query_from(d.text), 1, ReadScope::everything());
    ASSERT_TRUE(hits.ok());
    if (!hits->empty() && (*hits)[0].chunk.doc_id == d.id) ++first;
  }
  std::printf("hashing relevance: %zu / %zu queries rank their document first\n", first, docs.size());
  EXPECT_GE(first, docs.size() * 98 / 100);
}

TEST(Corpus, PersistsAcrossReopenAndUsesSavedIndex) {
  World w;
  TempDir dir;
  auto docs = w.docs(30, 3);
  uint64_t seq;
  {
    auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
    ASSERT_TRUE(c->ingest(docs).ok());
    seq = c->stats().seq;
  }  // close saves the index
  CorpusOptions ro = small_opts();
  ro.read_only = true;
  auto c = Corpus::open(dir.path(), ro, nullptr);  // read-only, hashing: no tokenizer needed
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto st = (*c)->stats();
  EXPECT_EQ(st.seq, seq);
  EXPECT_EQ(st.index_saved_seq, seq);
  EXPECT_EQ(st.documents, 30u);
  EXPECT_EQ(st.embedder, "hashing-v2/d=384/uni+bi");
  EXPECT_EQ(st.index_spec, "Flat");
  auto hits = (*c)->search(query_from(docs[3].text), 1, ReadScope::everything());
  EXPECT_EQ((*hits)[0].chunk.doc_id, docs[3].id);
  EXPECT_TRUE((*c)->check_consistency().ok());
  auto ing = (*c)->ingest(docs);
  ASSERT_FALSE(ing.ok());
  EXPECT_NE(ing.status().message().find("read-only"), std::string::npos);
}

// Citation fields (url, format, page, metadata) and section paths are stored with the document and
// its chunks, come back in every mode's hits and in get_document after a reopen; a section heading
// is searchable lexically in every chunk of its section; a change to metadata alone replaces the
// document.
TEST(Corpus, CitationFieldsAndSectionsSurviveReopen) {
  World w;
  TempDir dir;
  auto docs = w.docs(8, 17, 6);
  Document& d = docs[2];
  d.url = "https://example.org/guide#install";
  d.format = "html";
  d.page = 7;
  d.metadata = {{"lang", "\"en\""}, {"year", "2021"}, {"tags", "[\"a\",1]"}};
  size_t mid = d.text.find("\n\n", d.text.size() / 3);
  ASSERT_NE(mid, std::string::npos);
  mid = d.text.find_first_not_of("\n", mid);
  d.sections = {{{"Guide"}, 0, mid}, {{"Guide", "Zygomorphic installation"}, mid, d.text.size()}};
  {
    auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
    auto sum = c->ingest(docs);
    ASSERT_TRUE(sum.ok()) << sum.status().to_string();
    EXPECT_EQ(sum->ingested, 8u);
  }
  CorpusOptions ro = small_opts();
  ro.read_only = true;
  auto c = std::move(Corpus::open(dir.path(), ro, nullptr)).value();
  auto info = c->get_document(d.id);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->url, d.url);
  EXPECT_EQ((*info)->format, "html");
  EXPECT_EQ((*info)->page, 7u);
  EXPECT_EQ((*info)->metadata, d.metadata);
  // The heading word is in no chunk's text: only the section path holds it.
  for (const auto& doc : docs) ASSERT_EQ(doc.text.find("Zygomorphic"), std::string::npos);
  SearchParams lex;
  lex.mode = RetrievalMode::kLexical;
  auto hits = c->search("zygomorphic", 20, ReadScope::everything(), lex);
  ASSERT_TRUE(hits.ok()) << hits.status().to_string();
  auto chunks_in_second = std::count_if((*info)->chunk_ids.begin(), (*info)->chunk_ids.end(), [&](uint64_t id) {
    auto ch = c->get_chunks(std::span<const uint64_t>(&id, 1));
    return ch.ok() && (*ch)[0] && (*ch)[0]->byte_begin >= mid;
  });
  ASSERT_GT(chunks_in_second, 1);  // more than the heading's own chunk
  EXPECT_EQ(static_cast<long>(hits->size()), chunks_in_second);
  for (const auto& h : *hits) {
    EXPECT_EQ(h.chunk.doc_id, d.id);
    EXPECT_EQ(h.chunk.section, (std::vector<std::string>{"Guide", "Zygomorphic installation"}));
    EXPECT_GE(h.chunk.byte_begin, mid);
    EXPECT_EQ(h.url, d.url);
    EXPECT_EQ(h.page, 7u);
    EXPECT_EQ(h.format, "html");
    EXPECT_EQ(h.metadata, d.metadata);
  }
  SearchParams dense;
  dense.mode = RetrievalMode::kDense;
  auto dh = c->search(query_from(d.text), 3, ReadScope::everything(), dense);
  ASSERT_TRUE(dh.ok());
  ASSERT_FALSE(dh->empty());
  EXPECT_EQ((*dh)[0].chunk.doc_id, d.id);
  EXPECT_EQ((*dh)[0].url, d.url);
  EXPECT_FALSE((*dh)[0].chunk.section.empty());
  c.reset();
  // Metadata alone changed: the document is replaced, not kept as unchanged.
  auto wc = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
  docs[2].metadata[1].second = "2022";
  auto again = wc->ingest(docs);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->replaced, 1u);
  EXPECT_EQ(again->unchanged, 7u);
  auto gi = wc->get_document(d.id);
  ASSERT_TRUE(gi.ok() && gi->has_value());
  EXPECT_EQ((*gi)->metadata[1].second, "2022");
  EXPECT_TRUE(wc->check_consistency().ok());
}

// A replaced document is found lexically at once in a tenant's (filtered) search of a large
// corpus: Xapian 1.4 misses documents added after a deletion while the changes are pending when
// the owner filter term's posting list is long; the corpus commits every change (corpus.cpp,
// commit_lexical_locked).
TEST(Corpus, ReplacedDocumentIsFoundLexicallyAtOnceInALargeCorpus) {
  World w;
  TempDir dir;
  std::vector<Document> many;
  for (int i = 0; i < 12000; ++i) many.push_back({"m" + std::to_string(i), "", w.common[i % 300] + " " + w.common[(i * 7) % 300] + "."});
  {
    auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
    ASSERT_TRUE(c->ingest(many).ok());
  }
  auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
  SearchParams lex;
  lex.mode = RetrievalMode::kLexical;
  Document d{"n1", "", "The quokkafish lives in reef lagoons."};
  ASSERT_TRUE(c->ingest(std::vector<Document>{d}).ok());
  EXPECT_EQ(c->search("quokkafish", 3, ReadScope::shared_only(), lex)->size(), 1u);
  d.text = "The zanzibarian teapot whistles.";
  ASSERT_EQ(c->ingest(std::vector<Document>{d})->replaced, 1u);
  for (const ReadScope& scope : {ReadScope::shared_only(), ReadScope::tenant("t"), ReadScope::everything()}) {
    auto h = c->search("zanzibarian", 3, scope, lex);
    ASSERT_TRUE(h.ok());
    ASSERT_EQ(h->size(), 1u);
    EXPECT_EQ((*h)[0].chunk.doc_id, "n1");
    EXPECT_TRUE(c->search("quokkafish", 3, scope, lex)->empty());
  }
  // Removing a document, then adding another: the same.
  ASSERT_TRUE(c->remove_document("m5").ok());
  ASSERT_TRUE(c->ingest(std::vector<Document>{{"n2", "", "Fnordic wombats."}}).ok());
  EXPECT_EQ(c->search("fnordic", 3, ReadScope::shared_only(), lex)->size(), 1u);
}

TEST(Corpus, CorruptedDocumentStoreFailsTheOpenNamingIt) {
  World w;
  TempDir dir;
  {
    auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
    ASSERT_TRUE(c->ingest(w.docs(20, 5)).ok());
  }
  { ASSERT_TRUE(Corpus::open(dir.path(), small_opts(), w.tok).ok()); }  // recovery writes the log into a table file
  std::vector<fs::path> ssts;
  for (const auto& e : fs::directory_iterator(fs::path(dir.path()) / "docstore"))
    if (e.path().extension() == ".sst") ssts.push_back(e.path());
  ASSERT_FALSE(ssts.empty());
  for (const auto& p : ssts) {  // flip bytes in the middle of every table file
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = fs::file_size(p);
    for (uint64_t off = size / 4; off < size / 2; off += 97) {
      f.seekg(static_cast<std::streamoff>(off));
      char b = 0;
      f.read(&b, 1);
      f.seekp(static_cast<std::streamoff>(off));
      b = static_cast<char>(b ^ 0x5A);
      f.write(&b, 1);
    }
  }
  auto c = Corpus::open(dir.path(), small_opts(), w.tok);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("docstore"), std::string::npos) << c.status().to_string();
}

TEST(Corpus, RebuildsMissingOrCorruptIndex) {
  World w;
  TempDir dir;
  auto docs = w.docs(20, 4);
  { ASSERT_TRUE(std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value()->ingest(docs).ok()); }
  std::filesystem::remove(dir / "index.faiss");
  {
    auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
    EXPECT_TRUE(c->check_consistency().ok());
    EXPECT_EQ((*c->search(query_from(docs[5].text), 1, ReadScope::everything()))[0].chunk.doc_id, docs[5].id);
  }
  { std::ofstream(dir / "index.faiss", std::ios::trunc) << "garbage"; }
  auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
  EXPECT_TRUE(c->check_consistency().ok());
  EXPECT_EQ(c->stats().vectors, c->stats().chunks);
}

TEST(Corpus, IvfCorpusTrainsOnceEnoughChunks) {
  World w;
  TempDir dir;
  CorpusOptions o = small_opts();
  o.index_spec = "IVF4,Flat";  // trains at 120 vectors
  auto c = std::move(Corpus::open(dir.path(), o, w.tok)).value();
  auto docs = w.docs(60, 6);
  ASSERT_TRUE(c->ingest(std::span<const Document>(docs.data(), 10)).ok());
  EXPECT_FALSE(c->stats().index_trained);
  ASSERT_TRUE(c->ingest(docs).ok());
  EXPECT_TRUE(c->stats().index_trained);
  SearchParams sp;
  sp.nprobe = 4;
  EXPECT_EQ((*c->search(query_from(docs[40].text), 1, ReadScope::everything(), sp))[0].chunk.doc_id, docs[40].id);
  const int stages[] = {1, 2, 4};
  int calls = 0;
  ASSERT_TRUE(c->search_progressive(query_from(docs[40].text), 3, stages, ReadScope::everything(),
                                    [&](size_t, int, const std::vector<Neighbor>& n) {
                                      ++calls;
                                      auto hits = c->fetch_hits(n, ReadScope::everything());
                                      EXPECT_TRUE(hits.ok());
                                      return true;
                                    }).ok());
  EXPECT_EQ(calls, 3);
}

// Progressive searches are filtered by the reader's scope at every stage, and fetch_hits drops
// neighbours a scope does not see even when they are handed to it (IVF and Flat).
TEST(Corpus, ProgressiveSearchIsScopedAtEveryStage) {
  for (const char* spec : {"IVF4,Flat", "Flat"}) {
    SCOPED_TRACE(spec);
    World w;
    TempDir dir;
    CorpusOptions o = small_opts();
    o.index_spec = spec;
    auto c = std::move(Corpus::open(dir.path(), o, w.tok)).value();
    auto shared = w.docs(40, 21);
    auto a = w.docs(23, 22);
    for (auto& d : a) d.tenant = "alpha";
    ASSERT_TRUE(c->ingest(shared).ok());
    ASSERT_TRUE(c->ingest(a).ok());
    ASSERT_EQ(c->stats().index_trained, true);
    const int stages[] = {1, 2, 4};
    for (size_t i = 0; i < 6; ++i) {
      const std::string q = query_from(a[i].text);
      std::vector<Neighbor> last;
      int calls = 0, nprobe0 = 0;
      ASSERT_TRUE(c->search_progressive(q, 3, stages, ReadScope::tenant("beta"),
                                        [&](size_t, int nprobe, const std::vector<Neighbor>& n) {
                                          ++calls;
                                          nprobe0 += nprobe == 0;
                                          auto hits = c->fetch_hits(n, ReadScope::tenant("beta"));
                                          EXPECT_TRUE(hits.ok());
                                          for (const auto& h : *hits) EXPECT_EQ(h.tenant, "") << h.chunk.doc_id;
                                          last = n;
                                          return true;
                                        })
                      .ok());
      if (std::string(spec) == "Flat") {
        EXPECT_EQ(calls, 1);  // one stage, reported with nprobe 0
        EXPECT_EQ(nprobe0, 1);
      }
      ASSERT_EQ(last.size(), 3u);
      // Alpha's own search finds its document; handing alpha's neighbours to beta's scope drops them.
      std::vector<Neighbor> mine;
      ASSERT_TRUE(c->search_progressive(q, 3, stages, ReadScope::tenant("alpha"),
                                        [&](size_t, int, const std::vector<Neighbor>& n) {
                                          mine = n;
                                          return true;
                                        })
                      .ok());
      auto as_alpha = c->fetch_hits(mine, ReadScope::tenant("alpha"));
      ASSERT_TRUE(as_alpha.ok());
      ASSERT_FALSE(as_alpha->empty());
      EXPECT_EQ((*as_alpha)[0].chunk.doc_id, a[i].id);
      EXPECT_EQ((*as_alpha)[0].tenant, "alpha");
      auto as_beta = c->fetch_hits(mine, ReadScope::tenant("beta"));
      ASSERT_TRUE(as_beta.ok());
      for (const auto& h : *as_beta) EXPECT_EQ(h.tenant, "");
      EXPECT_LT(as_beta->size(), as_alpha->size());
    }
  }
}

TEST(Corpus, RefusesOtherEmbedder) {
  World w;
  TempDir dir;
  { ASSERT_TRUE(Corpus::open(dir.path(), small_opts(), w.tok).ok()); }
  CorpusOptions o = small_opts();
  o.embedder.name = "hashing";
  o.embedder.dim = 128;
  auto c = Corpus::open(dir.path(), o, w.tok);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("embedder 'hashing-v2/d=384/uni+bi'"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("'hashing-v2/d=128/uni+bi'"), std::string::npos);
}

TEST(Corpus, RefusesOtherIndexSpec) {
  World w;
  TempDir dir;
  { ASSERT_TRUE(Corpus::open(dir.path(), small_opts(), w.tok).ok()); }
  CorpusOptions o = small_opts();
  o.index_spec = "HNSW32";
  auto c = Corpus::open(dir.path(), o, w.tok);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'Flat', asked for 'HNSW32'"), std::string::npos) << c.status().message();
}

TEST(Corpus, SecondWriterIsRefused) {
  World w;
  TempDir dir;
  auto a = Corpus::open(dir.path(), small_opts(), w.tok);
  ASSERT_TRUE(a.ok());
  auto b = Corpus::open(dir.path(), small_opts(), w.tok);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("in use by another writer"), std::string::npos);
  CorpusOptions ro = small_opts();
  ro.read_only = true;
  EXPECT_TRUE(Corpus::open(dir.path(), ro, nullptr).ok());  // readers are fine
}

TEST(Corpus, ReadOnlyOpenOfMissingCorpusNamesIt) {
  TempDir dir;
  CorpusOptions ro;
  ro.read_only = true;
  auto c = Corpus::open(dir / "nothing", ro, nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no corpus here"), std::string::npos);
}

TEST(Corpus, InvalidDocumentsAreReportedNotWritten) {
  World w;
  TempDir dir;
  auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
  std::vector<Document> docs(5);
  docs[0] = {"", "t", "text", ""};
  docs[1] = {"bad-utf8", "t", "abc \xFF def", ""};
  docs[2] = {"blank", "t", "   \n\n  ", ""};
  docs[3] = {"ok", "t", "A fine sentence.", "src://ok"};
  docs[4] = {std::string(2000, 'x'), "t", "text", ""};
  auto s = c->ingest(docs);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ingested, 1u);
  EXPECT_EQ(s->rejected, 4u);
  ASSERT_EQ(s->problems.size(), 4u);
  EXPECT_EQ(s->problems[0].path, "#0");
  EXPECT_NE(s->problems[0].reason.find("empty document id"), std::string::npos);
  EXPECT_EQ(s->problems[1].path, "bad-utf8");
  EXPECT_NE(s->problems[1].reason.find("not valid UTF-8 (byte 4)"), std::string::npos);
  EXPECT_NE(s->problems[2].reason.find("empty text"), std::string::npos);
  EXPECT_NE(s->problems[3].reason.find("longer than 1024"), std::string::npos);
  EXPECT_EQ((*c->get_document("ok"))->source, "src://ok");
  EXPECT_TRUE(c->check_consistency().ok());
}

TEST(Corpus, SearchRejectsBadK) {
  World w;
  TempDir dir;
  auto c = std::move(Corpus::open(dir.path(), small_opts(), w.tok)).value();
  auto s = c->search("hello", 0, ReadScope::everything());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("k must be"), std::string::npos);
}

TEST(Corpus, IngestWithoutTokenizerIsRefused) {
  TempDir dir;
  auto c = std::move(Corpus::open(dir.path(), CorpusOptions{}, nullptr)).value();
  Document d{"a", "", "text", ""};
  auto s = c->ingest(std::span<const Document>(&d, 1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("needs a tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace ragd::retrieval

namespace ragd::retrieval {
namespace {

// Tenants: each sees its own and the shared documents, k results, ids in its own space; the
// owner survives a reopen; shared documents are read-only to tenants.
TEST(CorpusTenants, SearchIsScopedAndTopKStaysK) {
  World w;
  TempDir dir;
  auto shared = w.docs(6, 11);
  auto a = w.docs(30, 12);
  auto b = w.docs(30, 13);
  for (auto& d : a) d.tenant = "alpha";
  for (auto& d : b) d.tenant = "beta";
  b[0].id = a[0].id;  // the same id in two tenants: two documents
  {
    auto c = Corpus::open(dir.path(), small_opts(), w.tok);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    ASSERT_TRUE((*c)->ingest(shared).ok());
    ASSERT_TRUE((*c)->ingest(a).ok());
    ASSERT_TRUE((*c)->ingest(b).ok());
    ASSERT_TRUE((*c)->check_consistency().ok()) << (*c)->check_consistency().to_string();
  }
  auto c = Corpus::open(dir.path(), small_opts(), w.tok);  // owners come back from the store
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto& corpus = **c;
  for (size_t i = 0; i < 5; ++i) {
    const std::string q = query_from(a[i].text);
    auto unscoped = corpus.search(q, 1, ReadScope::everything());
    ASSERT_TRUE(unscoped.ok());
    ASSERT_EQ(unscoped->size(), 1u);
    EXPECT_EQ((*unscoped)[0].tenant, "alpha");
    auto as_b = corpus.search(q, 8, ReadScope::tenant("beta"));
    ASSERT_TRUE(as_b.ok());
    EXPECT_EQ(as_b->size(), 8u);  // top-k stays k
    for (const auto& h : *as_b) EXPECT_NE(h.tenant, "alpha") << h.chunk.doc_id;
    auto as_a = corpus.search(q, 3, ReadScope::tenant("alpha"));
    ASSERT_TRUE(as_a.ok());
    ASSERT_FALSE(as_a->empty());
    EXPECT_EQ((*as_a)[0].chunk.doc_id, a[i].id);  // ids as the owner named them
    auto as_shared = corpus.search(q, 4, ReadScope::tenant(""));
    ASSERT_TRUE(as_shared.ok());
    for (const auto& h : *as_shared) EXPECT_EQ(h.tenant, "");
    auto unknown = corpus.search(q, 4, ReadScope::tenant("gamma"));  // a tenant with no documents
    ASSERT_TRUE(unknown.ok());
    EXPECT_EQ(unknown->size(), 4u);
    for (const auto& h : *unknown) EXPECT_EQ(h.tenant, "");
  }
  // Reads and deletes by owner.
  auto mine = corpus.get_document(a[0].id, "alpha");
  ASSERT_TRUE(mine.ok() && mine->has_value());
  EXPECT_EQ((*mine)->tenant, "alpha");
  auto theirs = corpus.get_document(a[0].id, "beta");
  ASSERT_TRUE(theirs.ok() && theirs->has_value());
  EXPECT_EQ((*theirs)->tenant, "beta");
  EXPECT_FALSE(corpus.get_document(a[1].id, "beta")->has_value());
  EXPECT_FALSE(corpus.get_document(a[1].id)->has_value());  // not shared
  EXPECT_TRUE(corpus.get_document(shared[0].id, "beta")->has_value());
  EXPECT_FALSE(*corpus.remove_document(a[1].id, "beta"));
  EXPECT_EQ(corpus.remove_document(shared[0].id, "beta").status().code(), StatusCode::kPermissionDenied);
  Document poison = shared[0];
  poison.tenant = "beta";
  poison.text = "poisoned";
  EXPECT_EQ(corpus.ingest(std::vector<Document>{poison}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(*corpus.remove_document(a[1].id, "alpha"));
  EXPECT_TRUE(corpus.check_consistency().ok());
}

// Rewrites every document record of the store in `dir` in `fn` (key, value) -> value.
void rewrite_documents(const std::string& dir, const std::function<std::string(const std::string&, std::string)>& fn) {
  rocksdb::DBOptions o;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* n : {"default", "documents", "chunks", "manifest"}) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, dir + "/docstore", cfs, &handles, &db).ok());
  std::vector<std::pair<std::string, std::string>> recs;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[1]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) recs.emplace_back(it->key().ToString(), it->value().ToString());
  it.reset();
  for (auto& [k, v] : recs) ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[1], k, fn(k, v)).ok());
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  delete db;
}

// A store written before tenants existed (version-1 document records, no owner) reads as
// all-shared: every tenant retrieves and reads its documents, none may change them.
TEST(CorpusTenants, StoreWithoutOwnersIsAllShared) {
  World w;
  TempDir dir;
  auto docs = w.docs(12, 21);
  {
    auto c = Corpus::open(dir.path(), small_opts(), w.tok);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->ingest(docs).ok());
  }
  // v3 shared record = 0x03, u64 0 (empty tenant), v1 fields..., then the citation fields (empty
  // url and format: two u64 0; page u32 0; no metadata: u64 0 = 28 bytes), xxh3;
  // v2 = 0x02 and the same without the citation fields; v1 = 0x01, v1 fields..., xxh3.
  // Every other document becomes v1, the rest v2: both older versions read as shared.
  int n = 0;
  rewrite_documents(dir.path(), [&n](const std::string&, std::string v) {
    constexpr size_t kCitationTail = 8 + 8 + 4 + 8;
    EXPECT_EQ(v[0], '\x03');
    std::string body = (n++ % 2 == 0)
        ? std::string(1, '\x01') + v.substr(9, v.size() - 9 - 8 - kCitationTail)
        : std::string(1, '\x02') + v.substr(1, v.size() - 1 - 8 - kCitationTail);
    uint64_t sum = xxh3_64(body.data(), body.size());
    body.append(reinterpret_cast<const char*>(&sum), 8);
    return body;
  });
  auto c = Corpus::open(dir.path(), small_opts(), w.tok);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto hits = (*c)->search(query_from(docs[3].text), 5, ReadScope::tenant("alpha"));
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 5u);
  EXPECT_EQ((*hits)[0].chunk.doc_id, docs[3].id);
  for (const auto& h : *hits) EXPECT_EQ(h.tenant, "");
  auto d = (*c)->get_document(docs[3].id, "alpha");
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->tenant, "");
  EXPECT_EQ((*c)->remove_document(docs[3].id, "alpha").status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE((*c)->check_consistency().ok());
}

// An unreadable document record (its owner unknown) stops the open: ownership never fails open.
TEST(CorpusTenants, UnreadableOwnershipRefusesToOpen) {
  World w;
  TempDir dir;
  {
    auto c = Corpus::open(dir.path(), small_opts(), w.tok);
    ASSERT_TRUE(c.ok());
    auto docs = w.docs(4, 22);
    for (auto& d : docs) d.tenant = "alpha";
    ASSERT_TRUE((*c)->ingest(docs).ok());
  }
  rewrite_documents(dir.path(), [](const std::string&, std::string v) {
    v[4] ^= 0x01;  // inside the owner field: the checksum no longer matches
    return v;
  });
  auto c = Corpus::open(dir.path(), small_opts(), w.tok);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kCorruption);
  EXPECT_NE(c.status().message().find("ownership cannot be read"), std::string::npos) << c.status().to_string();
}

// A tenant's document and a shared one of the same id are two documents (two id spaces): once an
// operator uploads the shared one, the tenant still updates its own (it used to get
// PermissionDenied), the shared one stays as the operator wrote it, and a tenant without its own
// document of that id still may not write it.
TEST(CorpusTenants, TenantUpdatesItsOwnDocumentBesideASharedOneOfTheSameId) {
  World w;
  TempDir dir;
  auto c = Corpus::open(dir.path(), small_opts(), w.tok);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto& corpus = **c;
  auto texts = w.docs(3, 31);
  Document mine = texts[0];
  mine.id = "report";
  mine.tenant = "alpha";
  ASSERT_TRUE(corpus.ingest(std::vector<Document>{mine}).ok());
  Document shared = texts[1];
  shared.id = "report";
  ASSERT_TRUE(corpus.ingest(std::vector<Document>{shared}).ok());
  const std::string shared_hash = (*corpus.get_document("report"))->content_hash;

  Document edited = mine;
  edited.text = texts[2].text;
  auto r = corpus.ingest(std::vector<Document>{edited});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->replaced, 1u);
  auto own = corpus.get_document("report", "alpha");
  ASSERT_TRUE(own.ok() && own->has_value());
  EXPECT_EQ((*own)->tenant, "alpha");
  EXPECT_EQ((*own)->bytes, texts[2].text.size());
  auto still = corpus.get_document("report");
  ASSERT_TRUE(still.ok() && still->has_value());
  EXPECT_EQ((*still)->tenant, "");
  EXPECT_EQ((*still)->content_hash, shared_hash);

  Document other = edited;
  other.tenant = "beta";  // no document "report" of its own
  EXPECT_EQ(corpus.ingest(std::vector<Document>{other}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*corpus.get_document("report", "beta"))->tenant, "");  // beta reads the shared one
  EXPECT_TRUE(*corpus.remove_document("report", "alpha"));
  EXPECT_EQ(corpus.remove_document("report", "alpha").status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(corpus.check_consistency().ok());
}

}  // namespace
}  // namespace ragd::retrieval

// Kill-and-reopen: a child process ingests batches and reports each acknowledged batch through a
// pipe; the parent SIGKILLs it mid-ingest, reopens the corpus and checks that every acknowledged
// document is stored and searchable and that nothing is half present: both indexes (lexical and
// vector) hold exactly the stored chunks, so a document is searchable in every mode exactly when
// it is stored (every acknowledged one; one the kill caught between its commit and its
// acknowledgement may be either way, but never only in one index). The child also removes
// documents as it goes (the lexical index keeps removed chunks as tombstones committed with it):
// an acknowledged removal stays removed in every index, one the kill caught may be either way.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <iterator>
#include <optional>
#include <set>

#include "ragd/retrieval/corpus.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

std::vector<Document> make_docs(const std::vector<std::string>& vocab, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> common(vocab.begin(), vocab.begin() + 200);
  std::vector<Document> out;
  for (size_t i = 0; i < n; ++i) {
    size_t base = 200 + (i * 30) % (vocab.size() - 230);
    std::vector<std::string> topic(vocab.begin() + static_cast<long>(base), vocab.begin() + static_cast<long>(base + 30));
    out.push_back({"r" + std::to_string(seed) + "-" + std::to_string(i), "", testing::make_text(rng, topic, common, 4), ""});
  }
  return out;
}

CorpusOptions crash_opts() {
  CorpusOptions o;
  o.chunker.chunk_tokens = 48;
  o.index_save_every_chunks = 120;  // saves often, so kills also land inside index saves
  o.index_spec = "IVF8,Flat";       // trains mid-run (240 vectors)
  return o;
}


std::string query_from(const std::string& text) {
  size_t a = text.find(". ");
  size_t b = text.find(". ", a + 2);
  return text.substr(a + 2, b - a - 2);
}

// Whether a search of `query` in `mode` over every document returns a chunk of `doc_id` (or, with
// `chunk_id`, that chunk) among its first k. nprobe 8 = every list of the IVF8 index: exact.
bool finds(const Corpus& c, const std::string& query, RetrievalMode mode, const std::string& doc_id,
           std::optional<uint64_t> chunk_id = std::nullopt, int k = 5) {
  SearchParams sp;
  sp.nprobe = 8;
  sp.mode = mode;
  auto hits = c.search(query, k, ReadScope::everything(), sp);
  EXPECT_TRUE(hits.ok()) << hits.status().to_string();
  if (!hits.ok()) return false;
  for (const auto& h : *hits)
    if (h.chunk.doc_id == doc_id && (!chunk_id || h.chunk.id == *chunk_id)) return true;
  return false;
}

constexpr RetrievalMode kModes[] = {RetrievalMode::kLexical, RetrievalMode::kDense, RetrievalMode::kHybrid};

TEST(CrashConsistency, SigkillMidIngestLosesNoAcknowledgedDocument) {
  auto vocab = testing::make_vocabulary(3000, 21);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  std::mt19937_64 rng(2024);
  std::set<std::string> acked, removing, removed;  // ingested; removal begun; removal acknowledged
  std::map<std::string, Document> all;
  for (int round = 0; round < 3; ++round) {
    auto docs = make_docs(vocab, 240, static_cast<uint64_t>(round + 1));
    for (const auto& d : docs) all[d.id] = d;
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      child_ingest(dir.path(), crash_opts(), tok, docs, 4, fds[1], /*remove_behind=*/true);
    }
    ::close(fds[1]);
    // Kill after a random number of acknowledged batches (between 20 % and 80 % of the run).
    size_t kill_after = 12 + rng() % 36;
    size_t lines = 0;
    std::string buf;
    char tmp[4096];
    bool killed = false;
    while (true) {
      ssize_t n = ::read(fds[0], tmp, sizeof tmp);
      if (n <= 0) break;
      buf.append(tmp, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        const std::string line = buf.substr(0, nl);
        if (line[0] == '~') {
          removing.insert(line.substr(1));
        } else if (line[0] == '-') {
          removed.insert(line.substr(1));
        } else {
          acked.insert(line);
        }
        buf.erase(0, nl + 1);
        ++lines;
      }
      if (!killed && lines >= kill_after * 4) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child was not killed mid-run (status " << status << ")";

    auto c = Corpus::open(dir.path(), crash_opts(), tok);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    Status consistent = (*c)->check_consistency();
    ASSERT_TRUE(consistent.ok()) << "round " << round << ": " << consistent.to_string();
    // Chunk by chunk: every stored chunk is found by its own text in each index. With the counts
    // compared by check_consistency (lexical entries = vectors = stored chunks), neither index
    // holds a chunk the store does not (an unacknowledged document's, or stale text under a
    // stored chunk's id).
    std::vector<DocumentInfo> stored_docs;
    ASSERT_TRUE((*c)->for_each_document([&](const DocumentInfo& d) {
                      stored_docs.push_back(d);
                      return true;
                    }).ok());
    std::set<std::string> stored;
    size_t chunks = 0;
    for (const DocumentInfo& d : stored_docs) {
      stored.insert(d.id);
      auto got = (*c)->get_chunks(d.chunk_ids);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      for (size_t i = 0; i < d.chunk_ids.size(); ++i) {
        ASSERT_TRUE((*got)[i].has_value()) << "chunk " << d.chunk_ids[i] << " of " << d.id << " not readable";
        ++chunks;
        for (RetrievalMode mode : {RetrievalMode::kLexical, RetrievalMode::kDense})
          EXPECT_TRUE(finds(**c, (*got)[i]->text, mode, d.id, d.chunk_ids[i]))
              << "round " << round << ": stored chunk " << d.chunk_ids[i] << " of " << d.id << " is not found by its own text in "
              << enum_name(mode) << " mode";
      }
    }
    EXPECT_EQ((*c)->stats().chunks, chunks);
    // Document by document: acknowledged => stored; stored <=> found by a query made from its
    // sentences in every mode (a stored, unacknowledged one: the kill fell between its commit and
    // its acknowledgement).
    size_t found = 0, stored_unacked = 0;
    for (const auto& [id, doc] : all) {
      const bool is_stored = stored.count(id) > 0;
      if (removed.count(id)) {
        ASSERT_FALSE(is_stored) << "round " << round << ": document " << id << " came back after its removal was acknowledged";
      } else if (acked.count(id) && !removing.count(id)) {
        auto d = (*c)->get_document(id);
        ASSERT_TRUE(d.ok());
        ASSERT_TRUE(d->has_value() && is_stored) << "acknowledged document " << id << " lost in round " << round;
      } else if (!acked.count(id) && is_stored) {
        ++stored_unacked;
      }
      int in_modes = 0;
      for (RetrievalMode mode : kModes) {
        const bool hit = finds(**c, query_from(doc.text), mode, id);
        in_modes += hit;
        if (!is_stored)
          EXPECT_FALSE(hit) << "round " << round << ": document " << id << " is not stored, yet found in " << enum_name(mode)
                            << " mode";
      }
      if (is_stored) found += in_modes == static_cast<int>(std::size(kModes));
    }
    EXPECT_EQ(found, stored.size()) << "round " << round;
    EXPECT_GE(stored.size(), acked.size() - removing.size());
    EXPECT_FALSE(removed.empty()) << "round " << round << ": no removal was acknowledged before the kill";
    EXPECT_LE(stored_unacked, 4u * static_cast<size_t>(round + 1))
        << "round " << round << ": more stored, unacknowledged documents than one batch per kill";
    std::printf("round %d: killed after %zu acknowledged lines; %zu acknowledged in total, %zu removed, %llu stored (%zu of "
                "them unacknowledged), %zu chunks checked in both indexes\n",
                round, lines, acked.size(), removed.size(), static_cast<unsigned long long>((*c)->stats().documents),
                stored_unacked, chunks);
  }
}

}  // namespace
}  // namespace ragd::retrieval

// Kill-and-reopen: a child process ingests batches and reports each acknowledged batch through a
// pipe; the parent SIGKILLs it mid-ingest, reopens the corpus and checks that every acknowledged
// document is stored and searchable and that nothing is half present.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

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

TEST(CrashConsistency, SigkillMidIngestLosesNoAcknowledgedDocument) {
  auto vocab = testing::make_vocabulary(3000, 21);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  std::mt19937_64 rng(2024);
  std::set<std::string> acked;
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
      child_ingest(dir.path(), crash_opts(), tok, docs, 4, fds[1]);
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
        acked.insert(buf.substr(0, nl));
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
    size_t found = 0;
    for (const auto& id : acked) {
      auto d = (*c)->get_document(id);
      ASSERT_TRUE(d.ok());
      ASSERT_TRUE(d->has_value()) << "acknowledged document " << id << " lost in round " << round;
      // Searchable in both indexes: a query made from its sentences finds it lexically and by
      // vector (exact search over all lists).
      int in_both = 0;
      for (RetrievalMode mode : {RetrievalMode::kLexical, RetrievalMode::kDense}) {
        SearchParams sp;
        sp.nprobe = 8;
        sp.mode = mode;
        auto hits = (*c)->search(query_from(all[id].text), 5, ReadScope::everything(), sp);
        ASSERT_TRUE(hits.ok());
        for (const auto& h : *hits)
          if (h.chunk.doc_id == id) {
            ++in_both;
            break;
          }
      }
      found += in_both == 2;
    }
    EXPECT_EQ(found, acked.size()) << "round " << round;
    std::printf("round %d: killed after %zu acknowledged documents; %zu acknowledged in total, %llu stored\n",
                round, lines, acked.size(), static_cast<unsigned long long>((*c)->stats().documents));
  }
}

}  // namespace
}  // namespace ragd::retrieval

// Replicas and snapshots: a read-only secondary follows a primary's document store and published
// index; writes on it are refused; a snapshot opens to the same search results; and a writer
// SIGKILLed mid-ingest leaves the replica (and the reopened primary) with whole documents only.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "ragd/retrieval/corpus.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<Document> make_docs(const std::vector<std::string>& vocab, size_t n, uint64_t seed, const std::string& prefix) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> common(vocab.begin(), vocab.begin() + 200);
  std::vector<Document> out;
  for (size_t i = 0; i < n; ++i) {
    size_t base = 200 + ((i + seed * 7) * 30) % (vocab.size() - 230);
    std::vector<std::string> topic(vocab.begin() + static_cast<long>(base), vocab.begin() + static_cast<long>(base + 30));
    out.push_back({prefix + std::to_string(seed) + "-" + std::to_string(i), "", testing::make_text(rng, topic, common, 3), ""});
  }
  return out;
}

std::string query_from(const std::string& text) {
  size_t a = text.find(". ");
  size_t b = text.find(". ", a + 2);
  return text.substr(a + 2, b - a - 2);
}

CorpusOptions primary_opts() {
  CorpusOptions o;
  o.chunker.chunk_tokens = 48;
  o.index_save_every_chunks = 100;  // publishes often: replicas load new index generations
  o.index_spec = "IVF8,Flat";
  return o;
}

CorpusOptions replica_opts(const std::string& primary, int catch_up_ms) {
  CorpusOptions o;
  o.secondary_of = primary;
  o.catch_up_ms = catch_up_ms;
  return o;
}

// Polls `pred` until it holds or `limit` passes.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

bool has_document(const Corpus& c, const std::string& id) {
  auto d = c.get_document(id);
  return d.ok() && d->has_value();
}

// Every visible document has every chunk, each naming it; every search hit's chunk and document
// are visible and the document lists the chunk. Returns "" or the first violation.
std::string whole_documents_only(const Corpus& c, const std::vector<std::string>& queries) {
  std::string bad;
  Status st = c.for_each_document([&](const DocumentInfo& d) {
    auto chunks = c.get_chunks(d.chunk_ids);
    if (!chunks.ok()) {
      bad = chunks.status().to_string();
      return false;
    }
    for (size_t i = 0; i < chunks->size(); ++i)
      if (!(*chunks)[i] || (*chunks)[i]->doc_id != d.id || (*chunks)[i]->token_ids.empty()) {
        bad = "document " + d.id + ": chunk " + std::to_string(d.chunk_ids[i]) + " missing or not its own";
        return false;
      }
    return true;
  });
  if (!st.ok()) return st.to_string();
  if (!bad.empty()) return bad;
  for (const auto& q : queries) {
    SearchParams sp;
    sp.nprobe = 8;
    auto hits = c.search(q, 8, ReadScope::everything(), sp);
    if (!hits.ok()) return hits.status().to_string();
    for (const auto& h : *hits) {
      uint64_t id = h.chunk.id;
      auto ch = c.get_chunks(std::span<const uint64_t>(&id, 1));
      if (!ch.ok() || !(*ch)[0]) return "hit chunk " + std::to_string(id) + " is not fetchable";
      auto d = c.get_document(h.chunk.doc_id);
      if (!d.ok() || !d->has_value()) return "hit of invisible document " + h.chunk.doc_id;
      const auto& ids = (*d)->chunk_ids;
      if (std::find(ids.begin(), ids.end(), id) == ids.end())
        return "hit chunk " + std::to_string(id) + " not listed by document " + h.chunk.doc_id;
    }
  }
  return "";
}

TEST(Replica, SeesPrimaryIngestWithinCatchUpPeriod) {
  auto vocab = testing::make_vocabulary(2000, 5);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  auto primary = Corpus::open(dir / "primary", primary_opts(), tok);
  ASSERT_TRUE(primary.ok()) << primary.status().to_string();
  auto first = make_docs(vocab, 12, 1, "a");
  ASSERT_TRUE((*primary)->ingest(first).ok());

  auto replica = Corpus::open(dir / "replica", replica_opts(dir / "primary", 100), tok);
  ASSERT_TRUE(replica.ok()) << replica.status().to_string();
  EXPECT_TRUE((*replica)->is_replica());
  EXPECT_EQ((*replica)->stats().documents, first.size());
  EXPECT_TRUE(has_document(**replica, first[3].id));

  auto later = make_docs(vocab, 5, 2, "b");
  for (const auto& d : later) EXPECT_FALSE(has_document(**replica, d.id)) << "visible before the primary wrote it";
  ASSERT_TRUE((*primary)->ingest(later).ok());
  for (const auto& d : later)
    EXPECT_TRUE(eventually([&] { return has_document(**replica, d.id); })) << d.id << " never reached the replica";
  // Searchable too (the replica replays the primary's log into its index).
  for (const auto& d : later) {
    EXPECT_TRUE(eventually([&] {
      SearchParams sp;
      sp.nprobe = 8;
      auto hits = (*replica)->search(query_from(d.text), 5, ReadScope::everything(), sp);
      if (!hits.ok()) return false;
      for (const auto& h : *hits)
        if (h.chunk.doc_id == d.id) return true;
      return false;
    })) << d.id << " not searchable on the replica";
  }
  // Removal follows as well.
  ASSERT_TRUE((*primary)->remove_document(first[0].id).ok());
  EXPECT_TRUE(eventually([&] { return !has_document(**replica, first[0].id); }));
  EXPECT_EQ(whole_documents_only(**replica, {query_from(first[0].text), query_from(later[1].text)}), "");
}

TEST(Replica, RejectsWritesWithAClearMessage) {
  auto vocab = testing::make_vocabulary(1000, 6);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  {
    auto primary = Corpus::open(dir / "primary", primary_opts(), tok);
    ASSERT_TRUE(primary.ok());
    ASSERT_TRUE((*primary)->ingest(make_docs(vocab, 3, 1, "a")).ok());
  }
  auto replica = Corpus::open(dir / "replica", replica_opts(dir / "primary", 1000), tok);
  ASSERT_TRUE(replica.ok()) << replica.status().to_string();
  auto ing = (*replica)->ingest(make_docs(vocab, 1, 9, "z"));
  ASSERT_FALSE(ing.ok());
  EXPECT_EQ(ing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(ing.status().message().find(kReplicaReadOnly), std::string::npos) << ing.status().to_string();
  auto rm = (*replica)->remove_document("a1-0");
  ASSERT_FALSE(rm.ok());
  EXPECT_EQ(rm.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(rm.status().message().find(kReplicaReadOnly), std::string::npos);
  EXPECT_EQ((*replica)->save_index().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(has_document(**replica, "a1-0"));
  // A replica of a directory without a corpus, or of itself, fails clearly.
  auto none = Corpus::open(dir / "r2", replica_opts(dir / "nothing", 1000), tok);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  auto self = Corpus::open(dir / "primary", replica_opts(dir / "primary", 1000), tok);
  EXPECT_EQ(self.status().code(), StatusCode::kInvalidArgument);
}

TEST(Replica, LoadsEachPublishedIndexAndAnswersLikeThePrimary) {
  auto vocab = testing::make_vocabulary(2000, 7);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  auto primary = Corpus::open(dir / "primary", primary_opts(), tok);
  ASSERT_TRUE(primary.ok());
  ASSERT_TRUE((*primary)->ingest(make_docs(vocab, 10, 1, "a")).ok());
  // A removal before the replica exists: its lexical index starts from the primary's (tombstone
  // included), so BM25's statistics, and the scores compared below, are the primary's.
  ASSERT_TRUE(*(*primary)->remove_document("a1-3"));
  auto replica = Corpus::open(dir / "replica", replica_opts(dir / "primary", 60000), tok);  // catch up by hand
  ASSERT_TRUE(replica.ok());
  std::mt19937_64 rng(77);
  for (int round = 0; round < 3; ++round) {
    auto docs = make_docs(vocab, 40, static_cast<uint64_t>(round + 2), "b");  // trains IVF, publishes
    ASSERT_TRUE((*primary)->ingest(docs).ok());
    ASSERT_TRUE(*(*primary)->remove_document(docs[static_cast<size_t>(round)].id));  // replayed as a tombstone
    ASSERT_TRUE((*primary)->save_index().ok());
    ASSERT_TRUE((*replica)->catch_up().ok());
    auto ps = (*primary)->stats(), rs = (*replica)->stats();
    EXPECT_EQ(rs.documents, ps.documents);
    EXPECT_EQ(rs.vectors, ps.vectors);
    EXPECT_EQ(rs.index_trained, ps.index_trained);
    EXPECT_TRUE((*replica)->check_consistency().ok()) << (*replica)->check_consistency().to_string();
    for (int q = 0; q < 6; ++q) {
      std::string query = query_from(docs[rng() % docs.size()].text);
      SearchParams sp;
      sp.nprobe = 3;  // partial probing: the same answer needs the same trained quantizer
      auto a = (*primary)->search(query, 6, ReadScope::everything(), sp);
      auto b = (*replica)->search(query, 6, ReadScope::everything(), sp);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_EQ(a->size(), b->size());
      for (size_t i = 0; i < a->size(); ++i) {
        EXPECT_EQ((*a)[i].chunk.id, (*b)[i].chunk.id) << "round " << round << " query " << q << " rank " << i;
        EXPECT_NEAR((*a)[i].score, (*b)[i].score, 1e-5);
      }
    }
  }
}

void expect_same_answers(Corpus& a, Corpus& b, const std::vector<std::string>& queries) {
  for (const auto& q : queries) {
    SearchParams sp;
    sp.nprobe = 2;
    auto x = a.search(q, 7, ReadScope::everything(), sp);
    auto y = b.search(q, 7, ReadScope::everything(), sp);
    ASSERT_TRUE(x.ok() && y.ok());
    ASSERT_EQ(x->size(), y->size()) << q;
    for (size_t i = 0; i < x->size(); ++i) {
      EXPECT_EQ((*x)[i].chunk.id, (*y)[i].chunk.id) << q << " rank " << i;
      EXPECT_EQ((*x)[i].chunk.doc_id, (*y)[i].chunk.doc_id);
      EXPECT_EQ((*x)[i].chunk.text, (*y)[i].chunk.text);
      EXPECT_NEAR((*x)[i].score, (*y)[i].score, 1e-5);
    }
  }
}

TEST(Snapshot, OpensToTheSameSearchResults) {
  auto vocab = testing::make_vocabulary(2000, 8);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  std::vector<std::string> queries;
  std::mt19937_64 rng(5);
  auto primary = Corpus::open(dir / "primary", primary_opts(), tok);
  ASSERT_TRUE(primary.ok());
  std::vector<Document> all;
  for (int b = 0; b < 4; ++b) {
    auto docs = make_docs(vocab, 25, static_cast<uint64_t>(b + 1), "s");
    ASSERT_TRUE((*primary)->ingest(docs).ok());
    all.insert(all.end(), docs.begin(), docs.end());
  }
  for (int i = 0; i < 8; ++i) queries.push_back(query_from(all[rng() % all.size()].text));
  ASSERT_TRUE((*primary)->remove_document(all[1].id).ok());  // a log entry after the last publish

  // Beside the running writer (this process holds the data directory's lock).
  auto live = Corpus::snapshot(dir / "primary", dir / "snap-live");
  ASSERT_TRUE(live.ok()) << live.status().to_string();
  EXPECT_TRUE(live->beside_writer);
  EXPECT_EQ(live->documents, all.size() - 1);
  {
    CorpusOptions ro;
    ro.read_only = true;
    auto snap = Corpus::open(dir / "snap-live", ro, tok);
    ASSERT_TRUE(snap.ok()) << snap.status().to_string();
    EXPECT_TRUE((*snap)->check_consistency().ok());
    expect_same_answers(**primary, **snap, queries);
  }
  // A non-empty target is refused; the source is untouched.
  auto again = Corpus::snapshot(dir / "primary", dir / "snap-live");
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Corpus::snapshot(dir / "nothing", dir / "x").status().code(), StatusCode::kNotFound);

  // With no writer: a checkpoint under the data directory's lock; the copy opens as a primary.
  primary->reset();
  auto quiet = Corpus::snapshot(dir / "primary", dir / "snap-quiet");
  ASSERT_TRUE(quiet.ok()) << quiet.status().to_string();
  EXPECT_FALSE(quiet->beside_writer);
  EXPECT_GT(quiet->index_seq, 0u);
  CorpusOptions ro;
  ro.read_only = true;
  auto orig = Corpus::open(dir / "primary", ro, tok);
  auto snap = Corpus::open(dir / "snap-quiet", primary_opts(), tok);
  ASSERT_TRUE(orig.ok() && snap.ok()) << snap.status().to_string();
  EXPECT_TRUE((*snap)->check_consistency().ok());
  expect_same_answers(**orig, **snap, queries);
  EXPECT_FALSE(std::filesystem::exists(dir / "snap-quiet/kvcache"));
}


TEST(Replica, WriterKilledMidIngestLeavesWholeDocumentsOnly) {
  auto vocab = testing::make_vocabulary(3000, 9);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  const std::string pdir = dir / "primary";
  {
    auto p = Corpus::open(pdir, primary_opts(), tok);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE((*p)->ingest(make_docs(vocab, 6, 1, "w")).ok());
  }
  auto docs = make_docs(vocab, 300, 2, "k");
  std::vector<std::string> queries;
  for (size_t i = 0; i < docs.size(); i += 37) queries.push_back(query_from(docs[i].text));

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    child_ingest(pdir, primary_opts(), tok, docs, 3, fds[1]);
  }
  ::close(fds[1]);
  auto replica = Corpus::open(dir / "replica", replica_opts(pdir, 20), tok);
  ASSERT_TRUE(replica.ok()) << replica.status().to_string();

  std::mt19937_64 rng(31);
  const size_t kill_after = 90 + rng() % 120;  // documents acknowledged before the kill
  std::set<std::string> acked;
  std::string buf;
  bool killed = false;
  size_t checks = 0;
  while (true) {
    pollfd pfd{fds[0], POLLIN, 0};
    int pr = ::poll(&pfd, 1, 5);
    if (pr > 0) {
      char tmp[4096];
      ssize_t n = ::read(fds[0], tmp, sizeof tmp);
      if (n <= 0) break;
      buf.append(tmp, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        acked.insert(buf.substr(0, nl));
        buf.erase(0, nl + 1);
      }
      if (!killed && acked.size() >= kill_after) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    // While the writer runs, the replica shows whole documents only.
    std::string v = whole_documents_only(**replica, {queries[checks % queries.size()]});
    ASSERT_EQ(v, "") << "while ingesting, after " << acked.size() << " acknowledged";
    ++checks;
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child not killed mid-run: " << status;

  // Every acknowledged document reaches the replica, whole.
  for (const auto& id : acked)
    ASSERT_TRUE(eventually([&] { return has_document(**replica, id); })) << "acknowledged " << id << " missing";
  EXPECT_EQ(whole_documents_only(**replica, queries), "");
  std::printf("killed after %zu acknowledged documents; the replica made %zu checks meanwhile and shows %llu\n",
              acked.size(), checks, static_cast<unsigned long long>((*replica)->stats().documents));

  // The reopened primary agrees, and the replica follows it again.
  auto p = Corpus::open(pdir, primary_opts(), tok);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_TRUE((*p)->check_consistency().ok()) << (*p)->check_consistency().to_string();
  for (const auto& id : acked) EXPECT_TRUE(has_document(**p, id)) << id;
  EXPECT_EQ(whole_documents_only(**p, queries), "");
  auto extra = make_docs(vocab, 2, 3, "after");
  ASSERT_TRUE((*p)->ingest(extra).ok());
  EXPECT_TRUE(eventually([&] { return has_document(**replica, extra[1].id); }));
  EXPECT_TRUE(eventually([&] { return (*replica)->stats().documents == (*p)->stats().documents; }));
}

}  // namespace
}  // namespace ragd::retrieval

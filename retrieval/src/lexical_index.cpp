#include "lexical_index.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>
#include <set>
#include <fmt/format.h>
#include <xapian.h>
#include "ragd/common/hash.h"
#include "ragd/retrieval/lexical_terms.h"
#include "term_counter.h"

namespace ragd::retrieval {

namespace {

// Function words of English questions and prose: they carry no topic, and in a question ("how do
// I ...", "what is the ...") they would otherwise outweigh the one content word that matters.
constexpr const char* kStopwords[] = {
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do",
    "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he",
    "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
    "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some",
    "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves", "s", "t", "d", "ll", "m", "re", "ve", "don", "doesn", "isn", "aren", "can't", "cannot", "want",
    "need", "way", "get", "use", "using", "there's", "what's", "how's", "let", "tell", "please", "explain"};

constexpr const char* kSeqKey = "ragd_seq";
// The term scheme's version: 5 = 4 in shards written without term lists (DB_NO_TERMLIST), removed
// chunks kept as tombstones (kDeadPrefix); 4 = STEM_ALL english, no positions, title x2, section x1, operator
// terms (symbol_terms), Xapian document number = chunk id + 1; 3 = the same with a "Q<id>" term and
// the id as document data; 2 = 3 without operator terms. An index without the key was written by
// version 1 (STEM_SOME).
constexpr const char* kTermsKey = "ragd_terms";
constexpr const char* kTermsVersion = "5";
// Metadata key naming a shard's place ("0", "1"): a search's posting sources meet the shards one
// at a time (Xapian hands each the shard itself) and read it to find that shard's tombstones.
constexpr const char* kShardKey = "ragd_shard";
// Metadata key of a removed chunk's document: kDeadPrefix + its number in the shard (decimal).
// The value is never empty (Xapian deletes a metadata key set to "").
constexpr const char* kDeadPrefix = "ragd_dead:";
// A shard is due for compaction (a rebuild from the store) when its tombstones reach this many and
// a quarter of its documents: until then they only skew BM25's statistics (document count, average
// length, term frequencies), never a result.
constexpr size_t kCompactionMinDead = 4096;
constexpr const char* kSymbolPrefix = "XS";
constexpr size_t kAddSlice = 256;  // chunks added per lock hold
constexpr const char* kOwnerPrefix = "XO";
constexpr unsigned kTitleWeight = 2;    // wdf per title word
// wdf per section-heading word: the heading is also the first paragraph of its section's first
// chunk; weights 0-3 measured within two questions of each other (docs/benchmarks.md)
constexpr unsigned kSectionWeight = 1;

// The index is kShards Xapian databases (shards), chunk c in shard c % kShards as its document
// c / kShards + 1: each shard has its own lock, so two threads write chunks at once (writing a
// document, Xapian's inversion and its compressed term list, is most of what is left of a chunk's
// indexing cost once terms are counted), and the commits of a batch run in parallel. Searched as
// one database, Xapian numbers shard s's document d as (d - 1) * kShards + s + 1 = c + 1: a hit's
// number is its chunk id + 1, and ties (broken by number) fall in chunk id order in every copy.
// Numbering by chunk id rather than giving each chunk a unique "Q<id>" term and its id as data
// spares a posting list and a data entry per chunk.
constexpr unsigned kShards = 2;
constexpr uint64_t kMaxChunkId = std::numeric_limits<Xapian::docid>::max() - 1;
unsigned shard_of(uint64_t chunk_id) { return static_cast<unsigned>(chunk_id % kShards); }
Xapian::docid shard_docid(uint64_t chunk_id) { return static_cast<Xapian::docid>(chunk_id / kShards + 1); }
uint64_t chunk_of(Xapian::docid did) { return static_cast<uint64_t>(did) - 1; }  // a number of the whole

constexpr char kFieldSep = '\x1f';
constexpr size_t kMaxTermBytes = 200;  // Xapian's limit is 245

// The boolean term of one (key, canonical value).
std::string field_term(std::string_view key, std::string_view value) {
  std::string t = "XM";
  t += key;
  t += kFieldSep;
  t += value;
  if (t.size() <= kMaxTermBytes) return t;
  return fmt::format("XH{:016x}", xxh3_64(t.data() + 2, t.size() - 2));
}

// The boolean query of a filter's conditions (all of them); MatchNothing when a condition can
// match no term of this index.
Xapian::Query filter_query(const Xapian::Database& db, const MetadataFilter& f) {
  std::vector<Xapian::Query> all;
  for (const MetadataCondition& c : f.all) {
    std::vector<Xapian::Query> any;
    if (c.op == MetadataCondition::Op::kIn) {
      for (const auto& v : c.values) any.emplace_back(field_term(c.key, v));
    } else {
      const std::string prefix = "XM" + c.key + kFieldSep + "n:";
      for (auto t = db.allterms_begin(prefix); t != db.allterms_end(prefix); ++t) {
        const std::string term = *t;
        double v = 0;
        auto r = std::from_chars(term.data() + prefix.size(), term.data() + term.size(), v);
        if (r.ec == std::errc() && r.ptr == term.data() + term.size() && c.in_range(v)) any.emplace_back(term);
      }
    }
    if (any.empty()) return Xapian::Query::MatchNothing;
    all.emplace_back(Xapian::Query::OP_OR, any.begin(), any.end());
  }
  return Xapian::Query(Xapian::Query::OP_AND, all.begin(), all.end());
}

Xapian::Query owner_query(const std::vector<std::string>& owners) {
  std::vector<Xapian::Query> terms;
  for (const std::string& o : owners) terms.emplace_back(kOwnerPrefix + o);
  return Xapian::Query(Xapian::Query::OP_OR, terms.begin(), terms.end());
}

// Operator terms: technical text names constructs by their syntax ("$@", ";;&", "2>&1", "**",
// "#!", "${#"), which a word tokenizer drops entirely, so a question quoting one found nothing by
// it. A run of 2-6 ASCII punctuation bytes holding at least one operator character ($ & | ~ * ^
// # ! < > = % @ `), quotes and . , trimmed from its ends, is a term ("XS" + the run) besides the
// words. Prose punctuation (".)", "),") has no operator character and makes none.
bool punct_byte(unsigned char c) { return c < 0x80 && std::ispunct(c); }
bool operator_byte(unsigned char c) { return std::strchr("$&|~*^#!<>=%@`", c) != nullptr && c != 0; }

}  // namespace

std::vector<std::string> symbol_terms(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    if (!punct_byte(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && punct_byte(static_cast<unsigned char>(text[j]))) ++j;
    std::string_view run = text.substr(i, j - i);
    i = j;
    auto trimmed = [](unsigned char c) { return c == '"' || c == '\'' || c == '.' || c == ','; };
    while (!run.empty() && trimmed(static_cast<unsigned char>(run.front()))) run.remove_prefix(1);
    while (!run.empty() && trimmed(static_cast<unsigned char>(run.back()))) run.remove_suffix(1);
    if (run.size() < 2 || run.size() > 6) continue;
    if (std::none_of(run.begin(), run.end(), [](char c) { return operator_byte(static_cast<unsigned char>(c)); })) continue;
    out.push_back(kSymbolPrefix + std::string(run));
  }
  return out;
}

namespace {

// This thread's term counter (it keeps a stem cache, and Xapian's stemmer keeps state per call):
// chunks are turned into documents outside the index's lock, on as many threads as add() is called
// from.
TermCounter& thread_terms() {
  thread_local TermCounter t{std::span<const char* const>(kStopwords)};
  return t;
}

// The Xapian document of one chunk (terms_version 4).
Xapian::Document make_document(const LexicalDoc& d) {
  TermCounter& tc = thread_terms();
  tc.clear();
  tc.add_text(d.title, kTitleWeight);
  tc.add_text(d.section, kSectionWeight);
  tc.add_text(d.text);
  Xapian::Document doc;
  for (const auto& [term, wdf] : tc.terms()) doc.add_term(term, wdf);
  for (const std::string& t : symbol_terms(d.text)) doc.add_term(t);
  doc.add_boolean_term(kOwnerPrefix + std::string(d.owner));
  for (const auto& [key, value] : d.fields) doc.add_boolean_term(field_term(key, value));
  return doc;
}

}  // namespace

std::vector<std::string> lexical_terms(std::string_view text) {
  TermCounter& tc = thread_terms();
  tc.clear();
  tc.add_text(text);
  std::vector<std::string> out;
  for (auto& [term, wdf] : tc.terms()) out.push_back(std::move(term));
  return out;  // sorted, each term once
}

namespace {

// NotFound unless `from` holds every shard of this layout.
Status expect_shards(const std::string& from) {
  std::error_code ec;
  for (unsigned s = 0; s < kShards; ++s)
    if (!std::filesystem::exists(fmt::format("{}/{}/iamglass", from, s), ec))
      return Status::NotFound(fmt::format("lexical index {}: no shard {}", from, s));
  return Status::OK();
}

// Shard `s` of the committed index at `from` written to `to` (which must not exist): its latest
// revision through Xapian's compaction, document numbers (chunk ids) kept. Throws Xapian::Error.
void copy_shard(const std::string& from, unsigned s, const std::string& to) {
  Xapian::Database(fmt::format("{}/{}", from, s)).compact(to, Xapian::DBCOMPACT_NO_RENUMBER);
}

}  // namespace

struct LexicalIndex::Impl {
  struct Shard {
    mutable std::mutex mu;  // guards everything below (Xapian objects are not thread-safe)
    std::string path;       // on disk; empty = in memory or read-only
    std::optional<Xapian::WritableDatabase> wdb;  // writable (disk or memory)
    std::optional<Xapian::Database> rdb;          // read-only
    uint64_t seq = 0;
    // Documents of removed chunks (tombstones, kDeadPrefix): a shard without term lists cannot
    // delete a document, so a removed chunk stays in Xapian and every search leaves it out inside
    // the match (live()); a rebuild drops them (compaction_due()).
    std::set<Xapian::docid> dead;
    const Xapian::Database& db() const { return wdb ? static_cast<const Xapian::Database&>(*wdb) : *rdb; }
    void load() {
      const std::string v = db().get_metadata(kSeqKey);
      seq = 0;
      std::from_chars(v.data(), v.data() + v.size(), seq);
      dead.clear();
      const size_t n = std::strlen(kDeadPrefix);
      for (auto k = db().metadata_keys_begin(kDeadPrefix); k != db().metadata_keys_end(kDeadPrefix); ++k) {
        const std::string key = *k;
        Xapian::docid d = 0;
        auto r = std::from_chars(key.data() + n, key.data() + key.size(), d);
        if (r.ec == std::errc() && d != 0) dead.insert(d);
      }
    }
    // Whether document `d` is in the database (live or dead).
    bool holds(Xapian::docid d) const {
      try {
        (void)db().get_doclength(d);
        return true;
      } catch (const Xapian::DocNotFoundError&) {
        return false;
      }
    }
    // A new empty writable database in place of this one (disk: its directory removed first).
    void recreate(unsigned place) {
      wdb.reset();
      if (path.empty()) {
        wdb.emplace(std::string(), Xapian::DB_BACKEND_INMEMORY);
      } else {
        std::filesystem::remove_all(path);
        wdb.emplace(path, Xapian::DB_CREATE_OR_OPEN | Xapian::DB_NO_TERMLIST);
      }
      wdb->set_metadata(kShardKey, std::to_string(place));
      dead.clear();
    }
  };
  std::array<Shard, kShards> shards;
  Xapian::Database all;  // the shards as one, for searches (which hold every shard's lock)
  bool legacy = false;   // a single-database index of term scheme 3 or older was found at open
  Xapian::Stem stem{"english"};  // the query parser's (searches hold every lock)
  Xapian::SimpleStopper stopper{std::begin(kStopwords), std::end(kStopwords)};

  void join() {
    all = Xapian::Database();
    for (const Shard& sh : shards) all.add_database(sh.db());
  }
  // Every shard's lock, in shard order (single-shard holders take one: no cycle).
  std::vector<std::unique_lock<std::mutex>> lock_all() const {
    std::vector<std::unique_lock<std::mutex>> l;
    l.reserve(kShards);
    for (const Shard& sh : shards) l.emplace_back(sh.mu);
    return l;
  }
  bool writable() const { return shards[0].wdb.has_value(); }
  // The tombstoned documents of the shard it is initialised on, in order: `q AND_NOT` them leaves
  // removed chunks out inside the match, so a top-k holds k live chunks whenever k match. Xapian
  // clones it for each shard of a search and initialises each clone with the shard itself, whose
  // kShardKey names its tombstones. Thread-safety: used under every shard's lock, by one search.
  class Tombstones final : public Xapian::PostingSource {
   public:
    explicit Tombstones(const Impl& m) : m_(m) {}
    Xapian::PostingSource* clone() const override { return new Tombstones(m_); }
    void init(const Xapian::Database& db) override {
      const std::string s = db.get_metadata(kShardKey);
      unsigned shard = 0;
      auto r = std::from_chars(s.data(), s.data() + s.size(), shard);
      if (r.ec != std::errc() || shard >= kShards) throw Xapian::DatabaseCorruptError("lexical index shard without its place (" + std::string(kShardKey) + ")");
      set_ = &m_.shards[shard].dead;
      started_ = false;
    }
    Xapian::doccount get_termfreq_min() const override { return static_cast<Xapian::doccount>(set_->size()); }
    Xapian::doccount get_termfreq_est() const override { return static_cast<Xapian::doccount>(set_->size()); }
    Xapian::doccount get_termfreq_max() const override { return static_cast<Xapian::doccount>(set_->size()); }
    void next(double) override {
      if (!started_) {
        started_ = true;
        it_ = set_->begin();
      } else {
        ++it_;
      }
    }
    void skip_to(Xapian::docid did, double) override {
      if (!started_) {
        started_ = true;
        it_ = set_->begin();
      }
      if (it_ != set_->end() && *it_ < did) it_ = set_->lower_bound(did);
    }
    bool at_end() const override { return started_ && it_ == set_->end(); }
    Xapian::docid get_docid() const override { return *it_; }

   private:
    const Impl& m_;
    const std::set<Xapian::docid>* set_ = nullptr;
    std::set<Xapian::docid>::const_iterator it_;
    bool started_ = false;
  };
  // `q` without the tombstoned chunks (caller holds every lock).
  Xapian::Query live(const Xapian::Query& q) const {
    if (!any_dead()) return q;
    return Xapian::Query(Xapian::Query::OP_AND_NOT, q, Xapian::Query((new Tombstones(*this))->release()));
  }
  // Whether any shard holds a tombstone (caller holds every lock).
  bool any_dead() const {
    return std::any_of(shards.begin(), shards.end(), [](const Shard& sh) { return !sh.dead.empty(); });
  }
};

LexicalIndex::LexicalIndex() : impl_(std::make_unique<Impl>()) {}
LexicalIndex::~LexicalIndex() = default;

Result<std::unique_ptr<LexicalIndex>> LexicalIndex::open(const std::string& path) {
  std::unique_ptr<LexicalIndex> x(new LexicalIndex());
  Impl& m = *x->impl_;
  std::error_code ec;
  // Term scheme 3 and older kept one glass database at `path` itself.
  m.legacy = std::filesystem::exists(std::filesystem::path(path) / "iamglass", ec);
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::IOError(fmt::format("lexical index {}: {}", path, ec.message()));
  try {
    for (unsigned s = 0; s < kShards; ++s) {
      Impl::Shard& sh = m.shards[s];
      sh.path = fmt::format("{}/{}", path, s);
      // Without term lists: glass compresses and stores every document's term list as it is added
      // (about a third of Xapian's cost of an add), which only deletion and replacement need; a
      // removed chunk is a tombstone instead. An existing shard opens as it was written (scheme 4
      // had term lists; format_current() then asks for the rebuild).
      sh.wdb.emplace(sh.path, Xapian::DB_CREATE_OR_OPEN | Xapian::DB_NO_TERMLIST);
      sh.wdb->set_metadata(kShardKey, std::to_string(s));
      sh.load();
    }
    m.join();
  } catch (const Xapian::Error& e) {
    return Status::IOError(fmt::format("lexical index {}: {}", path, e.get_description()));
  }
  return x;
}

Result<std::unique_ptr<LexicalIndex>> LexicalIndex::open_read_only(const std::string& path) {
  std::unique_ptr<LexicalIndex> x(new LexicalIndex());
  Impl& m = *x->impl_;
  try {
    for (unsigned s = 0; s < kShards; ++s) {
      m.shards[s].rdb.emplace(fmt::format("{}/{}", path, s));
      m.shards[s].load();
    }
    m.join();
  } catch (const Xapian::DatabaseOpeningError& e) {
    return Status::NotFound(fmt::format("lexical index {}: {}", path, e.get_description()));
  } catch (const Xapian::Error& e) {
    return Status::IOError(fmt::format("lexical index {}: {}", path, e.get_description()));
  }
  return x;
}

Result<std::unique_ptr<LexicalIndex>> LexicalIndex::open_memory() {
  std::unique_ptr<LexicalIndex> x(new LexicalIndex());
  try {
    for (unsigned s = 0; s < kShards; ++s) {
      Impl::Shard& sh = x->impl_->shards[s];
      sh.wdb.emplace(std::string(), Xapian::DB_BACKEND_INMEMORY);
      sh.wdb->set_metadata(kShardKey, std::to_string(s));
    }
    x->impl_->join();
  } catch (const Xapian::Error& e) {
    return Status::Internal(fmt::format("lexical index in memory: {}", e.get_description()));
  }
  return x;
}

Status LexicalIndex::copy_committed(const std::string& from, const std::string& to) {
  RAGD_RETURN_IF_ERROR(expect_shards(from));
  std::error_code ec;
  std::filesystem::create_directories(to, ec);
  if (ec) return Status::IOError(fmt::format("lexical index copy {}: {}", to, ec.message()));
  try {
    for (unsigned s = 0; s < kShards; ++s) copy_shard(from, s, fmt::format("{}/{}", to, s));
  } catch (const Xapian::Error& e) {
    std::filesystem::remove_all(to, ec);
    return Status::IOError(fmt::format("lexical index copy {} -> {}: {}", from, to, e.get_description()));
  }
  return Status::OK();
}

Status LexicalIndex::adopt_committed(const std::string& from) {
  Impl& m = *impl_;
  if (!m.writable() || m.shards[0].path.empty()) return Status::FailedPrecondition("lexical index: not a writable index on disk");
  RAGD_RETURN_IF_ERROR(expect_shards(from));
  const auto locks = m.lock_all();
  std::string error;
  try {
    m.all = Xapian::Database();
    for (unsigned s = 0; s < kShards; ++s) {
      Impl::Shard& sh = m.shards[s];
      sh.wdb.reset();
      std::filesystem::remove_all(sh.path);
      copy_shard(from, s, sh.path);
      sh.wdb.emplace(sh.path, Xapian::DB_OPEN | Xapian::DB_NO_TERMLIST);
      sh.wdb->set_metadata(kShardKey, std::to_string(s));
      sh.load();
    }
    m.join();
    return Status::OK();
  } catch (const Xapian::Error& e) {
    error = e.get_description();
  } catch (const std::exception& e) {
    error = e.what();
  }
  for (unsigned s = 0; s < kShards; ++s) m.shards[s].recreate(s);
  m.join();
  return Status::IOError(fmt::format("lexical index: adopting {}: {}", from, error));
}

Status LexicalIndex::add(std::span<const LexicalDoc> docs) {
  for (size_t b = 0; b < docs.size(); b += kAddSlice)
    RAGD_RETURN_IF_ERROR(add_slice(docs.subspan(b, std::min(kAddSlice, docs.size() - b))));
  return Status::OK();
}

Status LexicalIndex::add_slice(std::span<const LexicalDoc> docs) {
  Impl& m = *impl_;
  if (!m.writable()) return Status::FailedPrecondition("lexical index opened read-only");
  for (const LexicalDoc& d : docs)
    if (d.chunk_id > kMaxChunkId)
      return Status::InvalidArgument(fmt::format("chunk id {} is beyond the lexical index's document numbers (at most {})",
                                                 d.chunk_id, kMaxChunkId));
  try {
    // Term counting runs outside the locks: threads adding disjoint chunks make their documents in
    // parallel, then write each shard's share under that shard's lock, the free shard first.
    std::array<std::vector<std::pair<Xapian::docid, Xapian::Document>>, kShards> made;
    for (const LexicalDoc& d : docs) made[shard_of(d.chunk_id)].emplace_back(shard_docid(d.chunk_id), make_document(d));
    auto write = [&](unsigned s) {
      Impl::Shard& sh = m.shards[s];
      // A number above the last one used is an add without a lookup. A chunk already in the index
      // is left as it is: chunk ids are never reused, so its terms are these (a replay of the
      // store's log after a crash adds it again), and a shard without term lists cannot replace a
      // document (Xapian would throw and drop the shard's pending changes).
      const Xapian::docid last = sh.wdb->get_lastdocid();
      for (const auto& [did, doc] : made[s])
        if (did > last || !sh.holds(did)) sh.wdb->replace_document(did, doc);
      made[s].clear();
    };
    for (unsigned s = 0; s < kShards; ++s) {
      if (made[s].empty() || !m.shards[s].mu.try_lock()) continue;
      std::lock_guard<std::mutex> l(m.shards[s].mu, std::adopt_lock);
      write(s);
    }
    for (unsigned s = 0; s < kShards; ++s) {
      if (made[s].empty()) continue;
      std::lock_guard<std::mutex> l(m.shards[s].mu);
      write(s);
    }
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index add: " + e.get_description());
  }
  return Status::OK();
}

Status LexicalIndex::remove(std::span<const uint64_t> ids) {
  Impl& m = *impl_;
  if (!m.writable()) return Status::FailedPrecondition("lexical index opened read-only");
  try {
    for (unsigned s = 0; s < kShards; ++s) {
      Impl::Shard& sh = m.shards[s];
      std::lock_guard<std::mutex> l(sh.mu);
      const Xapian::docid last = sh.wdb->get_lastdocid();
      for (uint64_t id : ids) {
        if (id > kMaxChunkId || shard_of(id) != s) continue;
        const Xapian::docid d = shard_docid(id);
        if (d > last || sh.dead.contains(d) || !sh.holds(d)) continue;  // absent: nothing to remove
        // The tombstone commits with the shard's other changes (Xapian's metadata is transactional).
        sh.wdb->set_metadata(kDeadPrefix + std::to_string(d), "1");
        sh.dead.insert(d);
      }
    }
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index remove: " + e.get_description());
  }
  return Status::OK();
}

Status LexicalIndex::clear() {
  Impl& m = *impl_;
  if (!m.writable()) return Status::FailedPrecondition("lexical index opened read-only");
  const auto locks = m.lock_all();
  try {
    m.all = Xapian::Database();  // drop the combined view's hold on the shards first
    for (unsigned s = 0; s < kShards; ++s) m.shards[s].recreate(s);
    m.join();
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index clear: " + e.get_description());
  } catch (const std::filesystem::filesystem_error& e) {
    return Status::IOError(std::string("lexical index clear: ") + e.what());
  }
  return Status::OK();
}

Status LexicalIndex::commit(uint64_t seq) {
  Impl& m = *impl_;
  if (!m.writable()) return Status::FailedPrecondition("lexical index opened read-only");
  // Each shard records the sequence number with its own commit; if a crash falls between them, the
  // corpus replays the store's log from the lower one (replaces and deletes by chunk id repeat
  // harmlessly). The shards commit in parallel.
  std::array<Status, kShards> st;
  auto commit_shard = [&](unsigned s) {
    Impl::Shard& sh = m.shards[s];
    std::lock_guard<std::mutex> l(sh.mu);
    try {
      sh.wdb->set_metadata(kSeqKey, std::to_string(seq));
      sh.wdb->set_metadata(kTermsKey, kTermsVersion);
      sh.wdb->commit();
      sh.seq = seq;
    } catch (const Xapian::Error& e) {
      st[s] = Status::IOError("lexical index commit: " + e.get_description());
    }
  };
  std::vector<std::thread> others;
  for (unsigned s = 1; s < kShards; ++s) others.emplace_back(commit_shard, s);
  commit_shard(0);
  for (std::thread& t : others) t.join();
  for (Status& s : st) RAGD_RETURN_IF_ERROR(std::move(s));
  return Status::OK();
}

uint64_t LexicalIndex::committed_seq() const {
  uint64_t seq = std::numeric_limits<uint64_t>::max();
  for (const Impl::Shard& sh : impl_->shards) {
    std::lock_guard<std::mutex> l(sh.mu);
    seq = std::min(seq, sh.seq);
  }
  return seq;
}

uint64_t LexicalIndex::size() const {
  uint64_t n = 0;
  for (const Impl::Shard& sh : impl_->shards) {
    std::lock_guard<std::mutex> l(sh.mu);
    n += sh.db().get_doccount() - sh.dead.size();
  }
  return n;
}

bool LexicalIndex::compaction_due() const {
  for (const Impl::Shard& sh : impl_->shards) {
    std::lock_guard<std::mutex> l(sh.mu);
    const size_t dead = sh.dead.size();
    if (dead >= kCompactionMinDead && 4 * dead >= sh.db().get_doccount()) return true;
  }
  return false;
}

bool LexicalIndex::format_current() const {
  if (impl_->legacy) return false;
  for (const Impl::Shard& sh : impl_->shards) {
    std::lock_guard<std::mutex> l(sh.mu);
    if (sh.db().get_doccount() != 0 && sh.db().get_metadata(kTermsKey) != kTermsVersion) return false;
  }
  return true;
}

Result<bool> LexicalIndex::contains(uint64_t id) const {
  if (id > kMaxChunkId) return false;
  const Impl::Shard& sh = impl_->shards[shard_of(id)];
  std::lock_guard<std::mutex> l(sh.mu);
  try {
    return !sh.dead.contains(shard_docid(id)) && sh.holds(shard_docid(id));
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index lookup: " + e.get_description());
  }
}

Result<std::vector<LexicalHit>> LexicalIndex::search(std::string_view query, int k,
                                                     const std::optional<std::vector<std::string>>& owners,
                                                     const MetadataFilter* filter) const {
  Impl& m = *impl_;
  std::vector<LexicalHit> out;
  if (k <= 0) return out;
  const auto locks = m.lock_all();
  try {
    Xapian::QueryParser qp;
    qp.set_stemmer(m.stem);
    qp.set_stopper(&m.stopper);
    qp.set_stemming_strategy(Xapian::QueryParser::STEM_ALL);
    qp.set_default_op(Xapian::Query::OP_OR);
    qp.set_database(m.all);
    const std::string q(query);
    Xapian::Query parsed;
    try {
      parsed = qp.parse_query(q, Xapian::QueryParser::FLAG_PHRASE | Xapian::QueryParser::FLAG_LOVEHATE);
    } catch (const Xapian::QueryParserError&) {
      parsed = qp.parse_query(q, 0);  // plain words
    }
    // Operator terms of the query (symbol_terms) widen it: a chunk holding "$@" matches a
    // question quoting it; BM25 weighs such a term by its rarity like any other.
    std::vector<std::string> symbols = symbol_terms(query);
    if (!symbols.empty()) {
      Xapian::Query sym(Xapian::Query::OP_OR, symbols.begin(), symbols.end());
      parsed = parsed.empty() ? sym : Xapian::Query(Xapian::Query::OP_OR, parsed, sym);
    }
    if (parsed.empty()) return out;
    if (owners) parsed = Xapian::Query(Xapian::Query::OP_FILTER, parsed, owner_query(*owners));
    if (filter && !filter->empty()) parsed = Xapian::Query(Xapian::Query::OP_FILTER, parsed, filter_query(m.all, *filter));
    Xapian::Enquire enq(m.all);
    enq.set_query(m.live(parsed));
    enq.set_weighting_scheme(Xapian::BM25Weight());  // k1 1, b 0.5: k1 0.9-1.5, b 0.4-0.75 measured the same
    // Xapian breaks ties by document number, ascending: by chunk id, alike in every copy of the
    // index (a rebuilt one, a replica's).
    const Xapian::MSet ms = enq.get_mset(0, static_cast<Xapian::doccount>(k));
    for (auto it = ms.begin(); it != ms.end(); ++it) out.push_back({chunk_of(*it), it.get_weight()});
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical search: " + e.get_description());
  }
  return out;
}

Result<std::vector<double>> LexicalIndex::term_shares(std::span<const std::string> terms,
                                                      const std::optional<std::vector<std::string>>& owners) const {
  Impl& m = *impl_;
  std::vector<double> out(terms.size(), 0.0);
  const auto locks = m.lock_all();
  try {
    const Xapian::Database& db = m.all;
    const bool dead = m.any_dead();
    // The live chunks matching `q`, counted exactly (check_at_least = every document).
    auto count = [&](const Xapian::Query& q) {
      Xapian::Enquire enq(db);
      enq.set_query(m.live(q));
      enq.set_weighting_scheme(Xapian::BoolWeight());
      return static_cast<double>(enq.get_mset(0, 0, db.get_doccount()).get_matches_estimated());
    };
    // Every chunk carries exactly one owner term: without tombstones the scope's chunks are the sum
    // of their counts.
    double total = 0;
    if (owners && !dead) {
      for (const std::string& o : *owners) total += db.get_termfreq(kOwnerPrefix + o);
    } else if (owners) {
      total = count(owner_query(*owners));
    } else {
      for (const Impl::Shard& sh : m.shards) total += static_cast<double>(sh.db().get_doccount() - sh.dead.size());
    }
    if (total <= 0) return out;
    for (size_t i = 0; i < terms.size(); ++i) {
      if (terms[i].empty()) continue;
      double n = db.get_termfreq(terms[i]);
      if ((owners || dead) && n > 0) {
        Xapian::Query q(terms[i]);
        if (owners) q = Xapian::Query(Xapian::Query::OP_FILTER, q, owner_query(*owners));
        n = count(q);
      }
      out[i] = std::min(1.0, n / total);
    }
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical term shares: " + e.get_description());
  }
  return out;
}

Result<std::vector<uint64_t>> LexicalIndex::matching(const MetadataFilter& filter,
                                                     const std::optional<std::vector<std::string>>& owners) const {
  Impl& m = *impl_;
  std::vector<uint64_t> out;
  const auto locks = m.lock_all();
  try {
    Xapian::Query q = filter_query(m.all, filter);
    if (owners) q = Xapian::Query(Xapian::Query::OP_FILTER, q, owner_query(*owners));
    Xapian::Enquire enq(m.all);
    enq.set_query(m.live(q));
    enq.set_weighting_scheme(Xapian::BoolWeight());
    enq.set_docid_order(Xapian::Enquire::ASCENDING);
    const Xapian::MSet ms = enq.get_mset(0, m.all.get_doccount());
    out.reserve(ms.size());
    for (auto it = ms.begin(); it != ms.end(); ++it) out.push_back(chunk_of(*it));
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical filter: " + e.get_description());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ragd::retrieval

#include "lexical_index.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <xapian.h>
#include "ragd/common/hash.h"
#include "ragd/retrieval/lexical_terms.h"

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
// The term scheme's version: 3 = STEM_ALL english, no positions, title x2, section x1, operator
// terms (symbol_terms); 2 = the same without operator terms. An index without the key was written
// by version 1 (STEM_SOME).
constexpr const char* kTermsKey = "ragd_terms";
constexpr const char* kTermsVersion = "3";
constexpr const char* kSymbolPrefix = "XS";
constexpr size_t kAddSlice = 256;  // chunks added per lock hold
constexpr const char* kOwnerPrefix = "XO";
constexpr unsigned kTitleWeight = 2;    // wdf per title word
// wdf per section-heading word: the heading is also the first paragraph of its section's first
// chunk; weights 0-3 measured within two questions of each other (docs/benchmarks.md)
constexpr unsigned kSectionWeight = 1;

std::string id_term(uint64_t id) { return "Q" + std::to_string(id); }

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

// The one configuration of chunk-text term generation (the index and lexical_terms()).
void configure_terms(Xapian::TermGenerator& tg, const Xapian::Stem& stem, Xapian::Stopper* stopper) {
  tg.set_stemmer(stem);
  tg.set_stopper(stopper);
  tg.set_stemming_strategy(Xapian::TermGenerator::STEM_ALL);
  tg.set_stopper_strategy(Xapian::TermGenerator::STOP_ALL);
}

}  // namespace

std::vector<std::string> lexical_terms(std::string_view text) {
  Xapian::Stem stem("english");
  Xapian::SimpleStopper stopper(std::begin(kStopwords), std::end(kStopwords));
  Xapian::TermGenerator tg;
  configure_terms(tg, stem, &stopper);
  Xapian::Document doc;
  tg.set_document(doc);
  tg.index_text_without_positions(std::string(text));
  std::vector<std::string> out;
  for (auto t = doc.termlist_begin(); t != doc.termlist_end(); ++t) out.push_back(*t);
  return out;  // a document's term list is sorted, each term once
}

struct LexicalIndex::Impl {
  mutable std::mutex mu;
  std::optional<Xapian::WritableDatabase> wdb;  // writable (disk or memory)
  std::optional<Xapian::Database> rdb;          // read-only
  Xapian::Stem stem{"english"};
  Xapian::SimpleStopper stopper{std::begin(kStopwords), std::end(kStopwords)};
  Xapian::TermGenerator tg;
  uint64_t seq = 0;

  Impl() { configure_terms(tg, stem, &stopper); }
  const Xapian::Database& db() const { return wdb ? static_cast<const Xapian::Database&>(*wdb) : *rdb; }
  void load_seq() {
    const std::string v = db().get_metadata(kSeqKey);
    seq = 0;
    std::from_chars(v.data(), v.data() + v.size(), seq);
  }
};

LexicalIndex::LexicalIndex() : impl_(std::make_unique<Impl>()) {}
LexicalIndex::~LexicalIndex() = default;

Result<std::unique_ptr<LexicalIndex>> LexicalIndex::open(const std::string& path) {
  std::unique_ptr<LexicalIndex> x(new LexicalIndex());
  try {
    x->impl_->wdb.emplace(path, Xapian::DB_CREATE_OR_OPEN);
    x->impl_->load_seq();
  } catch (const Xapian::Error& e) {
    return Status::IOError(fmt::format("lexical index {}: {}", path, e.get_description()));
  }
  return x;
}

Result<std::unique_ptr<LexicalIndex>> LexicalIndex::open_read_only(const std::string& path) {
  std::unique_ptr<LexicalIndex> x(new LexicalIndex());
  try {
    x->impl_->rdb.emplace(path);
    x->impl_->load_seq();
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
    x->impl_->wdb.emplace(std::string(), Xapian::DB_BACKEND_INMEMORY);
  } catch (const Xapian::Error& e) {
    return Status::Internal(fmt::format("lexical index in memory: {}", e.get_description()));
  }
  return x;
}

Status LexicalIndex::add(std::span<const LexicalDoc> docs, bool fresh) {
  for (size_t b = 0; b < docs.size(); b += kAddSlice)
    RAGD_RETURN_IF_ERROR(add_slice(docs.subspan(b, std::min(kAddSlice, docs.size() - b)), fresh));
  return Status::OK();
}

Status LexicalIndex::add_slice(std::span<const LexicalDoc> docs, bool fresh) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> l(m.mu);
  if (!m.wdb) return Status::FailedPrecondition("lexical index opened read-only");
  try {
    for (const LexicalDoc& d : docs) {
      Xapian::Document doc;
      m.tg.set_document(doc);
      if (!d.title.empty()) {
        m.tg.index_text_without_positions(std::string(d.title), kTitleWeight);
        m.tg.increase_termpos();
      }
      if (!d.section.empty()) {
        m.tg.index_text_without_positions(std::string(d.section), kSectionWeight);
        m.tg.increase_termpos();
      }
      m.tg.index_text_without_positions(std::string(d.text));
      for (const std::string& t : symbol_terms(d.text)) doc.add_term(t);
      const std::string q = id_term(d.chunk_id);
      doc.add_boolean_term(q);
      doc.add_boolean_term(kOwnerPrefix + std::string(d.owner));
      for (const auto& [key, value] : d.fields) doc.add_boolean_term(field_term(key, value));
      doc.set_data(std::to_string(d.chunk_id));
      if (fresh) m.wdb->add_document(doc);
      else m.wdb->replace_document(q, doc);
    }
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index add: " + e.get_description());
  }
  return Status::OK();
}

Status LexicalIndex::remove(std::span<const uint64_t> ids) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> l(m.mu);
  if (!m.wdb) return Status::FailedPrecondition("lexical index opened read-only");
  try {
    for (uint64_t id : ids) m.wdb->delete_document(id_term(id));
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index remove: " + e.get_description());
  }
  return Status::OK();
}

Status LexicalIndex::clear() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> l(m.mu);
  if (!m.wdb) return Status::FailedPrecondition("lexical index opened read-only");
  try {
    // Every chunk carries exactly one owner term, so the owner terms' postings list them all.
    std::vector<Xapian::docid> all;
    for (auto t = m.wdb->allterms_begin(kOwnerPrefix); t != m.wdb->allterms_end(kOwnerPrefix); ++t)
      for (auto p = m.wdb->postlist_begin(*t); p != m.wdb->postlist_end(*t); ++p) all.push_back(*p);
    for (Xapian::docid d : all) m.wdb->delete_document(d);
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index clear: " + e.get_description());
  }
  return Status::OK();
}

Status LexicalIndex::commit(uint64_t seq) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> l(m.mu);
  if (!m.wdb) return Status::FailedPrecondition("lexical index opened read-only");
  try {
    m.wdb->set_metadata(kSeqKey, std::to_string(seq));
    m.wdb->set_metadata(kTermsKey, kTermsVersion);
    m.wdb->commit();
    m.seq = seq;
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index commit: " + e.get_description());
  }
  return Status::OK();
}

uint64_t LexicalIndex::committed_seq() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->seq;
}

uint64_t LexicalIndex::size() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->db().get_doccount();
}

bool LexicalIndex::format_current() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  const Xapian::Database& db = impl_->db();
  return db.get_doccount() == 0 || db.get_metadata(kTermsKey) == kTermsVersion;
}

Result<bool> LexicalIndex::contains(uint64_t id) const {
  std::lock_guard<std::mutex> l(impl_->mu);
  try {
    return impl_->db().term_exists(id_term(id));
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
  std::lock_guard<std::mutex> l(m.mu);
  try {
    Xapian::QueryParser qp;
    qp.set_stemmer(m.stem);
    qp.set_stopper(&m.stopper);
    qp.set_stemming_strategy(Xapian::QueryParser::STEM_ALL);
    qp.set_default_op(Xapian::Query::OP_OR);
    qp.set_database(m.db());
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
    if (filter && !filter->empty()) parsed = Xapian::Query(Xapian::Query::OP_FILTER, parsed, filter_query(m.db(), *filter));
    Xapian::Enquire enq(m.db());
    enq.set_query(parsed);
    enq.set_weighting_scheme(Xapian::BM25Weight());  // k1 1, b 0.5: k1 0.9-1.5, b 0.4-0.75 measured the same
    // Xapian breaks ties by its own document numbers, which depend on the order chunks were added
    // (a rebuilt index or a replica numbers them differently): fetch a few more and break ties by
    // chunk id, so every copy of the index ranks alike.
    const Xapian::MSet ms = enq.get_mset(0, static_cast<Xapian::doccount>(k) + 16);
    for (auto it = ms.begin(); it != ms.end(); ++it) {
      const std::string data = it.get_document().get_data();
      uint64_t id = 0;
      std::from_chars(data.data(), data.data() + data.size(), id);
      out.push_back({id, it.get_weight()});
    }
    std::sort(out.begin(), out.end(), [](const LexicalHit& a, const LexicalHit& b) {
      return a.score != b.score ? a.score > b.score : a.chunk_id < b.chunk_id;
    });
    if (out.size() > static_cast<size_t>(k)) out.resize(static_cast<size_t>(k));
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical search: " + e.get_description());
  }
  return out;
}

Result<std::vector<double>> LexicalIndex::term_shares(std::span<const std::string> terms,
                                                      const std::optional<std::vector<std::string>>& owners) const {
  Impl& m = *impl_;
  std::vector<double> out(terms.size(), 0.0);
  std::lock_guard<std::mutex> l(m.mu);
  try {
    const Xapian::Database& db = m.db();
    // Every chunk carries exactly one owner term: the scope's chunks are the sum of their counts.
    double total = db.get_doccount();
    if (owners) {
      total = 0;
      for (const std::string& o : *owners) total += db.get_termfreq(kOwnerPrefix + o);
    }
    if (total <= 0) return out;
    for (size_t i = 0; i < terms.size(); ++i) {
      if (terms[i].empty()) continue;
      double n = db.get_termfreq(terms[i]);
      if (owners && n > 0) {
        Xapian::Enquire enq(db);
        enq.set_query(Xapian::Query(Xapian::Query::OP_FILTER, Xapian::Query(terms[i]), owner_query(*owners)));
        enq.set_weighting_scheme(Xapian::BoolWeight());
        // check_at_least = every document: the count is exact, not an estimate.
        n = enq.get_mset(0, 0, db.get_doccount()).get_matches_estimated();
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
  std::lock_guard<std::mutex> l(m.mu);
  try {
    Xapian::Query q = filter_query(m.db(), filter);
    if (owners) q = Xapian::Query(Xapian::Query::OP_FILTER, q, owner_query(*owners));
    Xapian::Enquire enq(m.db());
    enq.set_query(q);
    enq.set_weighting_scheme(Xapian::BoolWeight());
    enq.set_docid_order(Xapian::Enquire::ASCENDING);
    const Xapian::MSet ms = enq.get_mset(0, m.db().get_doccount());
    out.reserve(ms.size());
    for (auto it = ms.begin(); it != ms.end(); ++it) {
      const std::string data = it.get_document().get_data();
      uint64_t id = 0;
      std::from_chars(data.data(), data.data() + data.size(), id);
      out.push_back(id);
    }
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical filter: " + e.get_description());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ragd::retrieval

// Tokenizer from tokenizer.json: added-token splitting, normalizer, pre-tokenizer (PCRE2 regex
// splits, ByteLevel, Metaspace, Digits), BPE model (bpe_model.h), decoder.
#include "ragd/engine/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <fstream>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <simdjson.h>

#include "added_tokens.h"

#include "bpe_model.h"
#include "ragd/engine/wordpiece.h"
#include "tokenizer_regex.h"

namespace ragd::engine {

namespace {

// How far past the vocabulary's size an id may lie (ids index dense tables; real vocabularies and
// their added tokens have at most a few hundred unused ids).
constexpr size_t kMaxIdGap = 65536;

using simdjson::dom::element;
using simdjson::dom::object;

using bpe::Regex;

const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 "▁"

void replace_all(std::string* s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  for (size_t f; (f = s->find(from, pos)) != std::string::npos; pos = f + from.size()) {
    out.append(*s, pos, f - pos);
    out += to;
  }
  out.append(*s, pos, std::string::npos);
  *s = std::move(out);
}

struct NormStep {
  enum class Kind { kPrepend, kReplace, kIdentity } kind;
  std::string a, b;
};

struct PreStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace, kDigits } kind;
  std::shared_ptr<Regex> regex;  // kSplit, kByteLevel with use_regex
  bool remove_matches = false;   // Split behavior "Removed"
  bool invert = false;
  bool add_prefix_space = false; // ByteLevel
  std::string replacement;       // Metaspace
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;             // Metaspace
  bool individual_digits = false;
};

// Reads an optional field; `out` keeps its default when the field is absent or of another type.
template <typename R, typename T>
void opt_get(R&& r, T& out) {
  if (std::forward<R>(r).get(out) != simdjson::SUCCESS) return;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class TokenizerImpl final : public Tokenizer {
 public:
  Status load(std::string_view json, std::string_view src);

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string token_bytes(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < bytes_.size() ? bytes_[id] : std::string();
  }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    auto it = token_ids_.find(token);
    if (it == token_ids_.end()) return std::nullopt;
    return it->second;
  }
  bool is_special(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(bytes_.size()); }
  std::optional<int32_t> bos_id() const override { return bos_; }
  std::vector<int32_t> eos_ids() const override { return eos_; }
  int leading_strip() const override { return leading_strip_; }

 private:
  Status bad(std::string_view what) const { return Status::InvalidArgument(fmt::format("{}: {}", src_, what)); }
  Status parse_model(const object& model);
  Status parse_normalizer(const element& e, std::string_view where);
  Status parse_pre_tokenizer(const element& e, std::string_view where);
  Status parse_decoder(const element& e, std::string_view where);
  void encode_segment(std::string_view seg, bool at_start, std::vector<int32_t>* out) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const;

  std::string src_;
  bpe::BpeModel bpe_;
  bool byte_level_ = false;
  std::vector<NormStep> norm_;
  std::vector<PreStep> pre_;
  std::vector<AddedToken> added_;
  // Added-token matching: content -> index into added_, and per first byte the distinct content
  // lengths, longest first (leftmost-longest match without scanning every token).
  std::unordered_map<std::string_view, int> added_index_;
  std::array<std::vector<size_t>, 256> added_lengths_;
  std::vector<std::string> bytes_;        // id -> decoded bytes
  std::vector<char> special_;             // id -> special
  std::unordered_map<std::string, int32_t, bpe::StringHash, std::equal_to<>> token_ids_;  // token / added content -> id
  std::optional<int32_t> bos_;
  std::vector<int32_t> eos_;
  int leading_strip_ = 0;
  std::string decode_space_from_;  // SentencePiece-style: the marker decoded as ' '

  mutable std::shared_mutex cache_mu_;
  struct SvHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  // pre-token -> ids; heterogeneous lookup by string_view.
  mutable std::unordered_map<std::string, std::vector<int32_t>, SvHash, std::equal_to<>> cache_;  // guarded by cache_mu_
  static constexpr size_t kCacheMaxEntries = 1 << 18;
  static constexpr size_t kCacheMaxPieceBytes = 128;
};

// ---- loading ----------------------------------------------------------------------------------

Status TokenizerImpl::parse_model(const object& model) {
  std::string_view type;
  if (model["type"].get_string().get(type) == simdjson::SUCCESS && type != "BPE")
    return bad(fmt::format("model.type '{}' is not supported (only BPE)", type));
  object vocab;
  if (model["vocab"].get_object().get(vocab) != simdjson::SUCCESS) return bad("model.vocab is missing or not an object");
  bpe::BpeModel::Options opts;
  opts.byte_level = byte_level_;
  bool b = false;
  if (model["byte_fallback"].get_bool().get(b) == simdjson::SUCCESS) opts.byte_fallback = b;
  if (model["ignore_merges"].get_bool().get(b) == simdjson::SUCCESS) opts.ignore_merges = b;
  if (model["fuse_unk"].get_bool().get(b) == simdjson::SUCCESS) opts.fuse_unk = b;

  std::vector<std::pair<int32_t, std::string>> entries;
  int32_t max_id = -1;
  for (auto field : vocab) {
    int64_t id = -1;
    if (field.value.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id > (1 << 26))
      return bad(fmt::format("model.vocab['{}'] must be a non-negative integer id", field.key));
    entries.emplace_back(static_cast<int32_t>(id), std::string(field.key));
    max_id = std::max(max_id, static_cast<int32_t>(id));
  }
  if (entries.empty()) return bad("model.vocab is empty");
  // Ids index dense tables: a vocabulary whose largest id is far past its size would make a tiny
  // file ask for gigabytes.
  if (static_cast<size_t>(max_id) >= entries.size() + kMaxIdGap)
    return bad(fmt::format("model.vocab: largest id {} is far beyond the {} entries (ids must be dense)", max_id,
                           entries.size()));
  token_ids_.reserve(entries.size() + 1024);
  bpe_.reserve(entries.size(), 0);
  bytes_.assign(max_id + 1, std::string());
  std::vector<char> have(max_id + 1, 0);
  std::vector<std::string> token_str(max_id + 1);
  for (auto& [id, tok] : entries) {
    if (have[id]) return bad(fmt::format("model.vocab: id {} is used by both '{}' and '{}'", id, token_str[id], tok));
    have[id] = 1;
    token_str[id] = tok;
    std::string key;
    if (byte_level_) {
      if (!bpe::unicode_to_bytes(tok, &key)) key = tok;  // not in byte space: kept verbatim
    } else {
      key = tok;
    }
    if (byte_level_) {
      bytes_[id] = key;
    } else {
      std::string d = tok;
      if (opts.byte_fallback && tok.size() == 6 && tok.starts_with("<0x") && tok.back() == '>' &&
          std::isxdigit(static_cast<unsigned char>(tok[3])) && std::isxdigit(static_cast<unsigned char>(tok[4]))) {
        d = std::string(1, static_cast<char>(std::stoi(tok.substr(3, 2), nullptr, 16)));
      } else if (!decode_space_from_.empty()) {
        replace_all(&d, decode_space_from_, " ");
      }
      bytes_[id] = d;
    }
    token_ids_.emplace(tok, id);
    bpe_.add_token(id, std::move(key));
  }
  std::string_view unk;
  if (model["unk_token"].get_string().get(unk) == simdjson::SUCCESS) {
    auto it = token_ids_.find(unk);
    if (it == token_ids_.end()) return bad(fmt::format("model.unk_token '{}' is not in the vocab", unk));
    opts.unk_id = it->second;
  }
  bpe_.set_options(opts);

  simdjson::dom::array merges;
  element merges_el;
  const bool have_merges = model["merges"].get(merges_el) == simdjson::SUCCESS && !merges_el.is_null();
  if (have_merges && merges_el.get_array().get(merges) != simdjson::SUCCESS) return bad("model.merges must be a list");
  size_t i = 0;
  std::string merged;
  if (have_merges) bpe_.reserve(0, merges.size());
  if (have_merges) for (auto m : merges) {
    std::string_view a, c;
    std::string_view s;
    simdjson::dom::array pair;
    if (m.get_string().get(s) == simdjson::SUCCESS) {
      const size_t sp = s.find(' ');
      if (sp == std::string_view::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string_view::npos)
        return bad(fmt::format("model.merges[{}]: '{}' is not two tokens separated by one space", i, s));
      a = s.substr(0, sp);
      c = s.substr(sp + 1);
    } else if (m.get_array().get(pair) == simdjson::SUCCESS && pair.size() == 2) {
      std::string_view x, y;
      if (pair.at(0).get_string().get(x) != simdjson::SUCCESS || pair.at(1).get_string().get(y) != simdjson::SUCCESS)
        return bad(fmt::format("model.merges[{}]: expected [\"a\", \"b\"]", i));
      a = x;
      c = y;
    } else {
      return bad(fmt::format("model.merges[{}]: expected \"a b\" or [\"a\", \"b\"]", i));
    }
    merged.assign(a).append(c);
    auto ia = token_ids_.find(a), ic = token_ids_.find(c), im = token_ids_.find(merged);
    if (ia == token_ids_.end()) return bad(fmt::format("model.merges[{}]: '{}' is not in the vocab", i, a));
    if (ic == token_ids_.end()) return bad(fmt::format("model.merges[{}]: '{}' is not in the vocab", i, c));
    if (im == token_ids_.end())
      return bad(fmt::format("model.merges[{}]: merged token '{}' is not in the vocab", i, merged));
    bpe_.add_merge(ia->second, ic->second, im->second);
    ++i;
  }
  bpe_.finalize();
  special_.assign(bytes_.size(), 0);
  return Status::OK();
}

Status TokenizerImpl::parse_normalizer(const element& e, std::string_view where) {
  if (e.is_null()) return Status::OK();
  std::string_view type;
  if (e["type"].get_string().get(type) != simdjson::SUCCESS) return bad(fmt::format("{}.type is missing", where));
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (e["normalizers"].get_array().get(list) != simdjson::SUCCESS)
      return bad(fmt::format("{}.normalizers must be a list", where));
    size_t i = 0;
    for (auto n : list) RAGD_RETURN_IF_ERROR(parse_normalizer(n, fmt::format("{}.normalizers[{}]", where, i++)));
  } else if (type == "Prepend") {
    std::string_view p;
    if (e["prepend"].get_string().get(p) != simdjson::SUCCESS) return bad(fmt::format("{}.prepend is missing", where));
    norm_.push_back({NormStep::Kind::kPrepend, std::string(p), ""});
  } else if (type == "Replace") {
    std::string_view from, to;
    if (e["pattern"]["String"].get_string().get(from) != simdjson::SUCCESS)
      return bad(fmt::format("{}: only Replace with a String pattern is supported", where));
    if (e["content"].get_string().get(to) != simdjson::SUCCESS) return bad(fmt::format("{}.content is missing", where));
    norm_.push_back({NormStep::Kind::kReplace, std::string(from), std::string(to)});
  } else if (type == "NFC" || type == "NFKC") {
    // Unicode composition is not applied: input is expected to be NFC already (true of almost
    // all text); documented limitation.
    norm_.push_back({NormStep::Kind::kIdentity, "", ""});
  } else {
    return bad(fmt::format("{}: normalizer type '{}' is not supported", where, type));
  }
  return Status::OK();
}

Status TokenizerImpl::parse_pre_tokenizer(const element& e, std::string_view where) {
  if (e.is_null()) return Status::OK();
  std::string_view type;
  if (e["type"].get_string().get(type) != simdjson::SUCCESS) return bad(fmt::format("{}.type is missing", where));
  PreStep st{};
  bool b = false;
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (e["pretokenizers"].get_array().get(list) != simdjson::SUCCESS)
      return bad(fmt::format("{}.pretokenizers must be a list", where));
    size_t i = 0;
    for (auto n : list) RAGD_RETURN_IF_ERROR(parse_pre_tokenizer(n, fmt::format("{}.pretokenizers[{}]", where, i++)));
    return Status::OK();
  } else if (type == "Split") {
    st.kind = PreStep::Kind::kSplit;
    std::string_view pat;
    std::string regex;
    if (e["pattern"]["Regex"].get_string().get(pat) == simdjson::SUCCESS) {
      regex = std::string(pat);
    } else if (e["pattern"]["String"].get_string().get(pat) == simdjson::SUCCESS) {
      regex = "\\Q" + std::string(pat) + "\\E";
    } else {
      return bad(fmt::format("{}.pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}", where));
    }
    auto r = Regex::compile(regex);
    if (!r.ok()) return bad(fmt::format("{}.pattern: {}", where, r.status().message()));
    st.regex = *r;
    std::string_view behavior = "Isolated";
    opt_get(e["behavior"].get_string(), behavior);
    if (behavior == "Removed") st.remove_matches = true;
    else if (behavior != "Isolated")
      return bad(fmt::format("{}.behavior '{}' is not supported (Isolated, Removed)", where, behavior));
    if (e["invert"].get_bool().get(b) == simdjson::SUCCESS && b)
      return bad(fmt::format("{}.invert = true is not supported", where));
  } else if (type == "ByteLevel") {
    st.kind = PreStep::Kind::kByteLevel;
    byte_level_ = true;
    if (e["add_prefix_space"].get_bool().get(b) == simdjson::SUCCESS) st.add_prefix_space = b;
    bool use_regex = true;
    if (e["use_regex"].get_bool().get(b) == simdjson::SUCCESS) use_regex = b;
    if (use_regex) {
      auto r = Regex::compile(kGpt2Pattern);
      if (!r.ok()) return bad(r.status().message());
      st.regex = *r;
    }
  } else if (type == "Metaspace") {
    st.kind = PreStep::Kind::kMetaspace;
    std::string_view rep = kMetaspace;
    opt_get(e["replacement"].get_string(), rep);
    st.replacement = std::string(rep);
    std::string_view scheme;
    if (e["prepend_scheme"].get_string().get(scheme) == simdjson::SUCCESS) {
      if (scheme == "always") st.prepend = PreStep::Prepend::kAlways;
      else if (scheme == "first") st.prepend = PreStep::Prepend::kFirst;
      else if (scheme == "never") st.prepend = PreStep::Prepend::kNever;
      else return bad(fmt::format("{}.prepend_scheme '{}' is not one of always, first, never", where, scheme));
    } else if (e["add_prefix_space"].get_bool().get(b) == simdjson::SUCCESS) {
      st.prepend = b ? PreStep::Prepend::kAlways : PreStep::Prepend::kNever;
    }
    if (e["split"].get_bool().get(b) == simdjson::SUCCESS) st.split = b;
    decode_space_from_ = st.replacement;
  } else if (type == "Digits") {
    st.kind = PreStep::Kind::kDigits;
    if (e["individual_digits"].get_bool().get(b) == simdjson::SUCCESS) st.individual_digits = b;
    auto r = Regex::compile(st.individual_digits ? "\\p{Nd}" : "\\p{Nd}+");
    if (!r.ok()) return bad(r.status().message());
    st.regex = *r;
  } else {
    return bad(fmt::format("{}: pre-tokenizer type '{}' is not supported", where, type));
  }
  pre_.push_back(std::move(st));
  return Status::OK();
}

Status TokenizerImpl::parse_decoder(const element& e, std::string_view where) {
  if (e.is_null()) return Status::OK();
  std::string_view type;
  if (e["type"].get_string().get(type) != simdjson::SUCCESS) return bad(fmt::format("{}.type is missing", where));
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (e["decoders"].get_array().get(list) != simdjson::SUCCESS) return bad(fmt::format("{}.decoders must be a list", where));
    size_t i = 0;
    for (auto n : list) RAGD_RETURN_IF_ERROR(parse_decoder(n, fmt::format("{}.decoders[{}]", where, i++)));
  } else if (type == "ByteLevel") {
    byte_level_ = true;
  } else if (type == "Metaspace") {
    std::string_view rep = kMetaspace, scheme;
    opt_get(e["replacement"].get_string(), rep);
    decode_space_from_ = std::string(rep);
    bool b = true;
    if (e["prepend_scheme"].get_string().get(scheme) == simdjson::SUCCESS) b = scheme != "never";
    else opt_get(e["add_prefix_space"].get_bool(), b);
    if (b) leading_strip_ = 1;
  } else if (type == "Replace") {
    std::string_view from, to;
    if (e["pattern"]["String"].get_string().get(from) != simdjson::SUCCESS || e["content"].get_string().get(to) != simdjson::SUCCESS)
      return bad(fmt::format("{}: only Replace with a String pattern is supported", where));
    if (to == " ") decode_space_from_ = std::string(from);
  } else if (type == "Strip") {
    int64_t start = 0;
    std::string_view content = " ";
    opt_get(e["content"].get_string(), content);
    opt_get(e["start"].get_int64(), start);
    if (content == " ") leading_strip_ = static_cast<int>(start);
  } else if (type != "ByteFallback" && type != "Fuse") {
    return bad(fmt::format("{}: decoder type '{}' is not supported", where, type));
  }
  return Status::OK();
}

Status TokenizerImpl::load(std::string_view json, std::string_view src) {
  src_ = std::string(src);
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err)
    return bad(fmt::format("invalid JSON: {}", simdjson::error_message(err)));
  if (!doc.is_object()) return bad("top level must be a JSON object");
  element e;
  // Pre-tokenizer and decoder first: they decide whether vocabulary strings are byte-level.
  if (doc["pre_tokenizer"].get(e) == simdjson::SUCCESS) RAGD_RETURN_IF_ERROR(parse_pre_tokenizer(e, "pre_tokenizer"));
  if (doc["normalizer"].get(e) == simdjson::SUCCESS) RAGD_RETURN_IF_ERROR(parse_normalizer(e, "normalizer"));
  if (doc["decoder"].get(e) == simdjson::SUCCESS) RAGD_RETURN_IF_ERROR(parse_decoder(e, "decoder"));
  for (const auto& n : norm_)
    if (n.kind == NormStep::Kind::kReplace && n.a == " " && decode_space_from_.empty()) decode_space_from_ = n.b;
  object model;
  if (doc["model"].get_object().get(model) != simdjson::SUCCESS) return bad("field 'model' is missing or not an object");
  RAGD_RETURN_IF_ERROR(parse_model(model));

  simdjson::dom::array added;
  if (doc["added_tokens"].get_array().get(added) == simdjson::SUCCESS) {
    size_t i = 0;
    for (auto t : added) {
      Result<AddedToken> parsed = parse_added_token(t, i, int64_t{1} << 26);
      if (!parsed.ok()) return bad(parsed.status().message());
      AddedToken at = std::move(parsed).value();
      if (static_cast<size_t>(at.id) >= bytes_.size() + kMaxIdGap)
        return bad(fmt::format("added_tokens[{}].id {} is far beyond the vocabulary's {} ids (ids must be dense)", i,
                               at.id, bytes_.size()));
      if (static_cast<size_t>(at.id) >= bytes_.size()) {
        bytes_.resize(at.id + 1);
        special_.resize(at.id + 1, 0);
      }
      bytes_[at.id] = at.content;
      special_[at.id] = at.special;
      token_ids_[at.content] = at.id;
      added_.push_back(std::move(at));
      ++i;
    }
  }
  for (size_t k = 0; k < added_.size(); ++k) {
    added_index_[added_[k].content] = static_cast<int>(k);
    auto& lens = added_lengths_[static_cast<unsigned char>(added_[k].content[0])];
    if (std::find(lens.begin(), lens.end(), added_[k].content.size()) == lens.end()) lens.push_back(added_[k].content.size());
  }
  for (auto& v : added_lengths_) std::sort(v.begin(), v.end(), std::greater<size_t>());

  // BOS: the first special token of the post-processor template, else a well-known name.
  std::string_view first;
  if (doc["post_processor"]["single"].at(0)["SpecialToken"]["id"].get_string().get(first) == simdjson::SUCCESS)
    bos_ = token_to_id(first);
  if (!bos_) {
    simdjson::dom::array procs;
    if (doc["post_processor"]["processors"].get_array().get(procs) == simdjson::SUCCESS)
      for (auto p : procs)
        if (p["single"].at(0)["SpecialToken"]["id"].get_string().get(first) == simdjson::SUCCESS) bos_ = token_to_id(first);
  }
  for (const char* name : {"<|begin_of_text|>", "<s>", "<|startoftext|>"})
    if (!bos_) bos_ = token_to_id(name);
  for (const char* name : {"<|end_of_text|>", "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>", "</s>"})
    if (auto id = token_to_id(name)) eos_.push_back(*id);
  return Status::OK();
}

// ---- encoding ---------------------------------------------------------------------------------

void TokenizerImpl::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() > kCacheMaxPieceBytes) {
    bpe_.apply(piece, out);
    return;
  }
  {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  bpe_.apply(piece, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
  std::unique_lock lock(cache_mu_);
  if (cache_.size() >= kCacheMaxEntries) cache_.clear();
  cache_.emplace(std::string(piece), std::move(ids));
}

void TokenizerImpl::encode_segment(std::string_view seg, bool at_start, std::vector<int32_t>* out) const {
  if (seg.empty()) return;
  // Pieces are views into `seg` or into `arena` (text a step rewrote); std::deque never moves them.
  std::deque<std::string> arena;
  std::string_view text = seg;
  if (!norm_.empty()) {
    std::string t(seg);
    for (const auto& n : norm_) {
      if (n.kind == NormStep::Kind::kPrepend) t = n.a + t;
      else if (n.kind == NormStep::Kind::kReplace) replace_all(&t, n.a, n.b);
    }
    text = arena.emplace_back(std::move(t));
  }
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (const auto& st : pre_) {
    next.clear();
    for (size_t pi = 0; pi < pieces.size(); ++pi) {
      std::string_view p = pieces[pi];
      switch (st.kind) {
        case PreStep::Kind::kSplit:
        case PreStep::Kind::kDigits:
          st.regex->split(p, [&](size_t b, size_t e, bool match) {
            if (!(match && st.remove_matches)) next.push_back(p.substr(b, e - b));
          });
          break;
        case PreStep::Kind::kByteLevel: {
          if (st.add_prefix_space && !p.empty() && p[0] != ' ') p = arena.emplace_back(" " + std::string(p));
          if (st.regex) {
            st.regex->split(p, [&](size_t b, size_t e, bool) { next.push_back(p.substr(b, e - b)); });
          } else {
            next.push_back(p);
          }
          break;
        }
        case PreStep::Kind::kMetaspace: {
          std::string q(p);
          replace_all(&q, " ", st.replacement);
          const bool prepend = st.prepend == PreStep::Prepend::kAlways ||
                               (st.prepend == PreStep::Prepend::kFirst && at_start && pi == 0);
          if (prepend && !q.starts_with(st.replacement)) q = st.replacement + q;
          std::string_view qv = arena.emplace_back(std::move(q));
          if (!st.split) {
            next.push_back(qv);
            break;
          }
          size_t b = 0;
          for (size_t f = qv.find(st.replacement, 1); f != std::string_view::npos; f = qv.find(st.replacement, f + 1)) {
            next.push_back(qv.substr(b, f - b));
            b = f;
          }
          next.push_back(qv.substr(b));
          break;
        }
      }
    }
    pieces.swap(next);
  }
  for (std::string_view p : pieces) encode_piece(p, out);
}

std::vector<int32_t> TokenizerImpl::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_) out.push_back(*bos_);
  size_t seg_begin = 0;
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (size_t len : added_lengths_[static_cast<unsigned char>(text[i])]) {
      if (i + len > text.size()) continue;
      auto it = added_index_.find(text.substr(i, len));
      if (it == added_index_.end()) continue;
      const AddedToken& t = added_[it->second];
      if (t.special && !parse_special) continue;
      hit = &t;
      break;
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t seg_end = i, after = i + hit->content.size();
    if (hit->lstrip)
      while (seg_end > seg_begin && is_space(text[seg_end - 1])) --seg_end;
    if (hit->rstrip)
      while (after < text.size() && is_space(text[after])) ++after;
    encode_segment(text.substr(seg_begin, seg_end - seg_begin), seg_begin == 0, &out);
    out.push_back(hit->id);
    seg_begin = i = after;
  }
  encode_segment(text.substr(seg_begin), seg_begin == 0, &out);
  return out;
}

std::string TokenizerImpl::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string raw;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) continue;
    if (skip_special && special_[id]) continue;
    if (first && leading_strip_ > 0) {
      const std::string& b = bytes_[id];
      size_t k = 0;
      while (k < b.size() && k < static_cast<size_t>(leading_strip_) && b[k] == ' ') ++k;
      raw.append(b, k, std::string::npos);
    } else {
      raw += bytes_[id];
    }
    first = false;
  }
  return sanitize_utf8(raw);
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("{}: cannot open tokenizer file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view json, std::string_view source_name) {
  if (WordPieceTokenizer::is_wordpiece_json(json)) {  // BERT-family encoders (wordpiece.h)
    RAGD_ASSIGN_OR_RETURN(auto wp, WordPieceTokenizer::from_json_wordpiece(json, source_name));
    return std::unique_ptr<Tokenizer>(std::move(wp));
  }
  auto t = std::make_unique<TokenizerImpl>();
  RAGD_RETURN_IF_ERROR(t->load(json, source_name));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_file(const std::string& path) {
  RAGD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return from_json(text, path);
}

}  // namespace ragd::engine

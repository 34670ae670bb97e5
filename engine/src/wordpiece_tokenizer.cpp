// WordPiece tokenizer (wordpiece.h): BertNormalizer, BertPreTokenizer, WordPiece model,
// TemplateProcessing / BertProcessing post-processor.
#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <simdjson.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>

#include "added_tokens.h"
#include "bpe_model.h"
#include "ragd/engine/wordpiece.h"
#include "wordpiece_text.h"

namespace ragd::engine {

// ---- normalisation and pre-tokenization (wordpiece_text.h) ------------------------------------

namespace wordpiece {

bool is_whitespace(char32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  return c >= 0x80 ? u_isUWhiteSpace(static_cast<UChar32>(c)) : (c == 0x0B || c == 0x0C);
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_C_MASK) != 0;
}

bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return c >= 0x80 && (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

namespace {

// NFD of text, then combining marks (Mn) removed.
void strip_accents(std::u32string* text) {
  bool ascii = true;
  for (char32_t c : *text) ascii = ascii && c < 0x80;
  if (ascii) return;
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&err);
  if (U_FAILURE(err)) return;  // ICU data missing: leave the text as it is
  std::u16string src;
  src.reserve(text->size() + 8);
  for (char32_t c : *text) {
    if (c < 0x10000) {
      src.push_back(static_cast<char16_t>(c));
    } else {
      src.push_back(static_cast<char16_t>(0xD800 + ((c - 0x10000) >> 10)));
      src.push_back(static_cast<char16_t>(0xDC00 + ((c - 0x10000) & 0x3FF)));
    }
  }
  std::u16string dst(src.size() * 3 + 16, u'\0');
  int32_t n = unorm2_normalize(nfd, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()),
                               reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    err = U_ZERO_ERROR;
    dst.assign(static_cast<size_t>(n), u'\0');
    n = unorm2_normalize(nfd, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()),
                         reinterpret_cast<UChar*>(dst.data()), n, &err);
  }
  if (U_FAILURE(err)) return;
  text->clear();
  for (int32_t i = 0; i < n; ++i) {
    char32_t c = dst[i];
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < n && dst[i + 1] >= 0xDC00 && dst[i + 1] < 0xE000) {
      c = 0x10000 + ((c - 0xD800) << 10) + (dst[i + 1] - 0xDC00);
      ++i;
    }
    if (u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK) continue;
    text->push_back(c);
  }
}

}  // namespace

void normalize(std::u32string* text, const NormalizerOptions& o) {
  if (!o.enabled) return;
  std::u32string out;
  out.reserve(text->size() + 8);
  for (char32_t c : *text) {
    if (o.clean_text) {
      if (c == 0 || c == 0xFFFD || is_control(c)) continue;
      if (is_whitespace(c)) {
        out.push_back(' ');
        continue;
      }
    }
    if (o.handle_chinese_chars && is_chinese_char(c)) {
      out.push_back(' ');
      out.push_back(c);
      out.push_back(' ');
      continue;
    }
    out.push_back(c);
  }
  if (o.strip_accents) strip_accents(&out);
  if (o.lowercase) {
    std::u32string low;
    low.reserve(out.size());
    for (char32_t c : out) {
      if (c < 0x80) {
        low.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
      } else if (c == 0x130) {  // the one character whose lower case is two: "i" + U+0307
        low.push_back('i');
        low.push_back(0x307);
      } else {
        low.push_back(static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
      }
    }
    out.swap(low);
  }
  text->swap(out);
}

void pre_tokenize(const std::u32string& text, bool split_punctuation, std::vector<std::string>* words) {
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) words->push_back(std::move(cur));
    cur.clear();
  };
  for (char32_t c : text) {
    if (is_whitespace(c)) {
      flush();
    } else if (split_punctuation && is_punctuation(c)) {
      flush();
      append_utf8(cur, c);
      flush();
    } else {
      append_utf8(cur, c);
    }
  }
  flush();
}

}  // namespace wordpiece

// ---- the tokenizer ----------------------------------------------------------------------------

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

struct TemplateItem {
  bool sequence = false;  // a Sequence item (A or B) rather than special tokens
  int which = 0;          // 0 = A, 1 = B
  std::vector<int32_t> ids;
  int32_t type_id = 0;
};

class WordPieceImpl final : public WordPieceTokenizer {
 public:
  Status load(std::string_view json, std::string_view src);

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    std::vector<int32_t> ids = encode_text(text, parse_special);
    if (!add_bos) return ids;
    EncoderInput in;
    apply_template(single_, {&ids, nullptr}, &in);
    return in.ids;
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string token_bytes(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < tokens_.size() ? tokens_[id] : std::string();
  }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  bool is_special(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(tokens_.size()); }
  std::optional<int32_t> bos_id() const override { return cls_; }
  std::vector<int32_t> eos_ids() const override {
    return sep_ ? std::vector<int32_t>{*sep_} : std::vector<int32_t>{};
  }

  std::vector<std::string> pre_tokenize(std::string_view text) const override {
    std::u32string u = utf8_decode(text);
    wordpiece::normalize(&u, norm_);
    std::vector<std::string> words;
    wordpiece::pre_tokenize(u, split_punct_, &words);
    return words;
  }
  EncoderInput encode_single(std::string_view text, int max_len) const override {
    std::vector<int32_t> a = encode_text(text, true);
    if (max_len > 0) {
      const int budget = std::max(0, max_len - special_single_);
      if (static_cast<int>(a.size()) > budget) a.resize(static_cast<size_t>(budget));
    }
    EncoderInput in;
    apply_template(single_, {&a, nullptr}, &in);
    return in;
  }
  EncoderInput encode_pair(std::string_view a_text, std::string_view b_text, int max_len) const override {
    std::vector<int32_t> a = encode_text(a_text, true), b = encode_text(b_text, true);
    if (max_len > 0) {
      const size_t budget = static_cast<size_t>(std::max(0, max_len - special_pair_));
      if (a.size() + b.size() > budget) {
        std::vector<int32_t>& shorter = a.size() <= b.size() ? a : b;
        std::vector<int32_t>& longer = a.size() <= b.size() ? b : a;
        shorter.resize(std::min(shorter.size(), budget / 2));
        longer.resize(budget - shorter.size());
      }
    }
    EncoderInput in;
    apply_template(pair_, {&a, &b}, &in);
    return in;
  }
  int special_tokens_single() const override { return special_single_; }
  int special_tokens_pair() const override { return special_pair_; }
  int32_t unk_id() const override { return unk_; }
  std::optional<int32_t> pad_id() const override { return pad_; }

 private:
  Status bad(std::string_view what) const { return Status::InvalidArgument(fmt::format("{}: {}", src_, what)); }
  Status parse_normalizer(const element& e);
  Status parse_pre_tokenizer(const element& e);
  Status parse_template(const element& list, std::string_view where, const object& specials,
                        std::vector<TemplateItem>* out);
  Status parse_post_processor(const element& e);
  std::vector<int32_t> encode_text(std::string_view text, bool parse_special) const;
  void encode_segment(std::string_view seg, std::vector<int32_t>* out) const;
  void encode_word(std::string_view word, std::vector<int32_t>* out) const;
  static void apply_template(const std::vector<TemplateItem>& t, std::array<const std::vector<int32_t>*, 2> seqs,
                             EncoderInput* in);
  int count_specials(const std::vector<TemplateItem>& t) const {
    int n = 0;
    for (const auto& it : t)
      if (!it.sequence) n += static_cast<int>(it.ids.size());
    return n;
  }

  std::string src_;
  wordpiece::NormalizerOptions norm_;
  bool split_punct_ = true;
  std::unordered_map<std::string, int32_t, bpe::StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> tokens_;  // id -> token text
  std::vector<char> special_;        // id -> special
  std::string prefix_ = "##";
  size_t max_chars_ = 100;
  int32_t unk_ = -1;
  std::optional<int32_t> cls_, sep_, pad_;
  std::vector<AddedToken> added_;  // longest content first
  std::vector<TemplateItem> single_, pair_;
  int special_single_ = 0, special_pair_ = 0;
};

Status WordPieceImpl::parse_normalizer(const element& e) {
  if (e.is_null()) {
    norm_.enabled = false;
    return Status::OK();
  }
  std::string_view type;
  if (e["type"].get_string().get(type) != simdjson::SUCCESS) return bad("normalizer.type is missing");
  if (type != "BertNormalizer")
    return bad(fmt::format("normalizer type '{}' is not supported with WordPiece (BertNormalizer or null)", type));
  bool b = false;
  if (e["clean_text"].get_bool().get(b) == simdjson::SUCCESS) norm_.clean_text = b;
  if (e["handle_chinese_chars"].get_bool().get(b) == simdjson::SUCCESS) norm_.handle_chinese_chars = b;
  if (e["lowercase"].get_bool().get(b) == simdjson::SUCCESS) norm_.lowercase = b;
  // strip_accents: null (or absent) follows lowercase.
  norm_.strip_accents = norm_.lowercase;
  if (e["strip_accents"].get_bool().get(b) == simdjson::SUCCESS) norm_.strip_accents = b;
  return Status::OK();
}

Status WordPieceImpl::parse_pre_tokenizer(const element& e) {
  if (e.is_null()) {
    split_punct_ = false;
    return Status::OK();
  }
  std::string_view type;
  if (e["type"].get_string().get(type) != simdjson::SUCCESS) return bad("pre_tokenizer.type is missing");
  if (type == "BertPreTokenizer") split_punct_ = true;
  else if (type == "WhitespaceSplit") split_punct_ = false;
  else
    return bad(fmt::format("pre_tokenizer type '{}' is not supported with WordPiece (BertPreTokenizer, "
                           "WhitespaceSplit or null)", type));
  return Status::OK();
}

Status WordPieceImpl::parse_template(const element& list, std::string_view where, const object& specials,
                                     std::vector<TemplateItem>* out) {
  simdjson::dom::array items;
  if (list.get_array().get(items) != simdjson::SUCCESS) return bad(fmt::format("{} must be a list", where));
  size_t i = 0;
  for (auto item : items) {
    TemplateItem t;
    int64_t type_id = 0;
    std::string_view id;
    element body;
    if (item["SpecialToken"].get(body) == simdjson::SUCCESS) {
      if (body["id"].get_string().get(id) != simdjson::SUCCESS)
        return bad(fmt::format("{}[{}].SpecialToken.id is missing", where, i));
      simdjson::dom::array ids;
      if (specials[id]["ids"].get_array().get(ids) == simdjson::SUCCESS) {
        for (auto x : ids) {
          int64_t v = -1;
          if (x.get_int64().get(v) != simdjson::SUCCESS || v < 0)
            return bad(fmt::format("post_processor.special_tokens['{}'].ids must be non-negative integers", id));
          t.ids.push_back(static_cast<int32_t>(v));
        }
      } else if (auto v = token_to_id(id)) {
        t.ids.push_back(*v);
      } else {
        return bad(fmt::format("{}[{}]: special token '{}' is neither in special_tokens nor in the vocabulary", where,
                               i, id));
      }
    } else if (item["Sequence"].get(body) == simdjson::SUCCESS) {
      t.sequence = true;
      if (body["id"].get_string().get(id) != simdjson::SUCCESS || (id != "A" && id != "B"))
        return bad(fmt::format("{}[{}].Sequence.id must be \"A\" or \"B\"", where, i));
      t.which = id == "A" ? 0 : 1;
    } else {
      return bad(fmt::format("{}[{}] is neither SpecialToken nor Sequence", where, i));
    }
    if (body["type_id"].get_int64().get(type_id) == simdjson::SUCCESS) t.type_id = static_cast<int32_t>(type_id);
    out->push_back(std::move(t));
    ++i;
  }
  return Status::OK();
}

Status WordPieceImpl::parse_post_processor(const element& e) {
  auto seq = [](int which, int32_t type) {
    TemplateItem t;
    t.sequence = true, t.which = which, t.type_id = type;
    return t;
  };
  auto tok = [](int32_t id, int32_t type) {
    TemplateItem t;
    t.ids = {id}, t.type_id = type;
    return t;
  };
  if (e.is_null()) {
    single_ = {seq(0, 0)};
    pair_ = {seq(0, 0), seq(1, 1)};
    return Status::OK();
  }
  std::string_view type;
  if (e["type"].get_string().get(type) != simdjson::SUCCESS) return bad("post_processor.type is missing");
  if (type == "TemplateProcessing") {
    object specials;
    if (e["special_tokens"].get_object().get(specials) != simdjson::SUCCESS)
      return bad("post_processor.special_tokens is missing");
    element list;
    if (e["single"].get(list) != simdjson::SUCCESS) return bad("post_processor.single is missing");
    RAGD_RETURN_IF_ERROR(parse_template(list, "post_processor.single", specials, &single_));
    if (e["pair"].get(list) == simdjson::SUCCESS) {
      RAGD_RETURN_IF_ERROR(parse_template(list, "post_processor.pair", specials, &pair_));
    } else {
      pair_ = single_;
      pair_.push_back(seq(1, 1));
    }
  } else if (type == "BertProcessing") {
    int64_t cls = -1, sep = -1;
    if (e["cls"].at(1).get_int64().get(cls) != simdjson::SUCCESS || e["sep"].at(1).get_int64().get(sep) != simdjson::SUCCESS ||
        cls < 0 || sep < 0)
      return bad("post_processor (BertProcessing): cls and sep must be [token, id]");
    const auto c = static_cast<int32_t>(cls), s = static_cast<int32_t>(sep);
    single_ = {tok(c, 0), seq(0, 0), tok(s, 0)};
    pair_ = {tok(c, 0), seq(0, 0), tok(s, 0), seq(1, 1), tok(s, 1)};
  } else {
    return bad(fmt::format("post_processor type '{}' is not supported with WordPiece (TemplateProcessing, "
                           "BertProcessing or null)", type));
  }
  for (const auto* t : {&single_, &pair_})
    for (const auto& it : *t)
      for (int32_t id : it.ids)
        if (id < 0 || static_cast<size_t>(id) >= tokens_.size())
          return bad(fmt::format("post_processor: special token id {} is outside the vocabulary ({} ids)", id,
                                 tokens_.size()));
  for (const auto& it : single_)
    if (!it.sequence && !it.ids.empty()) {
      if (!cls_) cls_ = it.ids.front();
      sep_ = it.ids.back();
    }
  return Status::OK();
}

Status WordPieceImpl::load(std::string_view json, std::string_view src) {
  src_ = std::string(src);
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err)
    return bad(fmt::format("invalid JSON: {}", simdjson::error_message(err)));
  object model;
  if (doc["model"].get_object().get(model) != simdjson::SUCCESS) return bad("field 'model' is missing or not an object");
  std::string_view type;
  if (model["type"].get_string().get(type) != simdjson::SUCCESS || type != "WordPiece")
    return bad("model.type is not \"WordPiece\"");
  object vocab;
  if (model["vocab"].get_object().get(vocab) != simdjson::SUCCESS) return bad("model.vocab is missing or not an object");
  int64_t max_id = -1;
  std::vector<std::pair<int32_t, std::string>> entries;
  for (auto field : vocab) {
    int64_t id = -1;
    if (field.value.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id > (1 << 24))
      return bad(fmt::format("model.vocab['{}'] must be a non-negative integer id", field.key));
    entries.emplace_back(static_cast<int32_t>(id), std::string(field.key));
    max_id = std::max(max_id, id);
  }
  if (entries.empty()) return bad("model.vocab is empty");
  tokens_.assign(static_cast<size_t>(max_id + 1), std::string());
  special_.assign(tokens_.size(), 0);
  for (auto& [id, tok] : entries) {
    if (!tokens_[id].empty()) return bad(fmt::format("model.vocab: id {} is used twice", id));
    vocab_[tok] = id;
    tokens_[id] = std::move(tok);
  }
  std::string_view s;
  std::string_view unk = "[UNK]";
  if (model["unk_token"].get_string().get(s) == simdjson::SUCCESS) unk = s;
  if (model["continuing_subword_prefix"].get_string().get(s) == simdjson::SUCCESS) prefix_ = std::string(s);
  int64_t mc = 0;
  if (model["max_input_chars_per_word"].get_int64().get(mc) == simdjson::SUCCESS) {
    if (mc <= 0) return bad("model.max_input_chars_per_word must be positive");
    max_chars_ = static_cast<size_t>(mc);
  }
  auto u = token_to_id(unk);
  if (!u) return bad(fmt::format("model.unk_token '{}' is not in the vocabulary", unk));
  unk_ = *u;

  simdjson::dom::array added;
  if (doc["added_tokens"].get_array().get(added) == simdjson::SUCCESS) {
    size_t i = 0;
    for (auto t : added) {
      Result<AddedToken> parsed = parse_added_token(t, i, int64_t{1} << 24);
      if (!parsed.ok()) return bad(parsed.status().message());
      AddedToken at = std::move(parsed).value();
      if (static_cast<size_t>(at.id) >= tokens_.size()) {
        if (static_cast<size_t>(at.id) > tokens_.size() + 65536)
          return bad(fmt::format("added_tokens[{}].id {} is far beyond the vocabulary", i, at.id));
        tokens_.resize(at.id + 1);
        special_.resize(at.id + 1, 0);
      }
      tokens_[at.id] = at.content;
      special_[at.id] = at.special;
      vocab_[at.content] = at.id;
      added_.push_back(std::move(at));
      ++i;
    }
  }
  std::stable_sort(added_.begin(), added_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });

  element e;
  if (doc["normalizer"].get(e) == simdjson::SUCCESS) RAGD_RETURN_IF_ERROR(parse_normalizer(e));
  else norm_.enabled = false;
  if (doc["pre_tokenizer"].get(e) == simdjson::SUCCESS) RAGD_RETURN_IF_ERROR(parse_pre_tokenizer(e));
  else split_punct_ = false;
  if (doc["post_processor"].get(e) == simdjson::SUCCESS) {
    RAGD_RETURN_IF_ERROR(parse_post_processor(e));
  } else {
    element null_elem;
    (void)parser.parse("null", 4).get(null_elem);
    RAGD_RETURN_IF_ERROR(parse_post_processor(null_elem));
  }
  special_single_ = count_specials(single_);
  special_pair_ = count_specials(pair_);
  pad_ = token_to_id("[PAD]");
  if (!pad_) pad_ = token_to_id("<pad>");
  return Status::OK();
}

void WordPieceImpl::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  std::vector<size_t> bounds;  // byte offset of each character, then the end
  for (size_t i = 0; i < word.size(); i += utf8_char_len(word, i)) bounds.push_back(i);
  const size_t n = bounds.size();
  bounds.push_back(word.size());
  if (n > max_chars_) {
    out->push_back(unk_);
    return;
  }
  const size_t mark = out->size();
  std::string buf;
  size_t start = 0;
  while (start < n) {
    size_t end = n;
    int32_t found = -1;
    for (; end > start; --end) {
      buf.clear();
      if (start > 0) buf = prefix_;
      buf.append(word.substr(bounds[start], bounds[end] - bounds[start]));
      auto it = vocab_.find(std::string_view(buf));
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {  // the word cannot be spelled: one unknown token for all of it
      out->resize(mark);
      out->push_back(unk_);
      return;
    }
    out->push_back(found);
    start = end;
  }
}

void WordPieceImpl::encode_segment(std::string_view seg, std::vector<int32_t>* out) const {
  if (seg.empty()) return;
  for (const std::string& w : pre_tokenize(seg)) encode_word(w, out);
}

std::vector<int32_t> WordPieceImpl::encode_text(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 4 + 4);
  size_t seg = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const auto& t : added_) {
      if (t.special && !parse_special) continue;
      if (text.compare(i, t.content.size(), t.content) == 0) {
        hit = &t;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    encode_segment(text.substr(seg, i - seg), &out);
    out.push_back(hit->id);
    i += hit->content.size();
    seg = i;
  }
  encode_segment(text.substr(seg), &out);
  return out;
}

void WordPieceImpl::apply_template(const std::vector<TemplateItem>& t, std::array<const std::vector<int32_t>*, 2> seqs,
                                   EncoderInput* in) {
  for (const auto& it : t) {
    if (it.sequence) {
      const std::vector<int32_t>* s = seqs[it.which];
      if (!s) continue;
      in->ids.insert(in->ids.end(), s->begin(), s->end());
      in->type_ids.insert(in->type_ids.end(), s->size(), it.type_id);
    } else {
      in->ids.insert(in->ids.end(), it.ids.begin(), it.ids.end());
      in->type_ids.insert(in->type_ids.end(), it.ids.size(), it.type_id);
    }
  }
}

std::string WordPieceImpl::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) continue;
    if (skip_special && special_[id]) continue;
    const std::string& t = tokens_[id];
    if (!prefix_.empty() && t.starts_with(prefix_)) {
      out.append(t, prefix_.size(), std::string::npos);
    } else {
      if (!out.empty()) out.push_back(' ');
      out += t;
    }
  }
  // The WordPiece decoder's clean-up: no space before punctuation and English contractions.
  for (std::string_view from : {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"}) {
    std::string to(from.substr(1));
    if (from == " ' ") to = "'";
    size_t pos = 0;
    while ((pos = out.find(from, pos)) != std::string::npos) {
      out.replace(pos, from.size(), to);
      pos += to.size();
    }
  }
  return sanitize_utf8(out);
}

}  // namespace

bool WordPieceTokenizer::is_wordpiece_json(std::string_view json) {
  if (json.find("\"WordPiece\"") == std::string_view::npos) return false;  // skips parsing BPE files
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) return false;
  std::string_view type;
  return doc["model"]["type"].get_string().get(type) == simdjson::SUCCESS && type == "WordPiece";
}

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::from_json_wordpiece(std::string_view json,
                                                                                    std::string_view source_name) {
  auto t = std::make_unique<WordPieceImpl>();
  RAGD_RETURN_IF_ERROR(t->load(json, source_name));
  return std::unique_ptr<WordPieceTokenizer>(std::move(t));
}

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::from_file_wordpiece(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("{}: cannot open tokenizer file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json_wordpiece(ss.str(), path);
}

}  // namespace ragd::engine

// WordPiece tokenization for BERT-family encoders, from a Hugging Face tokenizer.json with
// "model": {"type": "WordPiece"}:
//   normalizer     BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase) or null
//   pre_tokenizer  BertPreTokenizer (split on Unicode white space, every punctuation character a
//                  word of its own) or null (white space only)
//   model          WordPiece: greedy longest-match-first per word, continuing pieces carry the
//                  continuing_subword_prefix ("##"); a word longer than max_input_chars_per_word
//                  characters, or one that cannot be spelled from the vocabulary, is one unk_token
//   post_processor TemplateProcessing or BertProcessing: [CLS] A [SEP] and [CLS] A [SEP] B [SEP]
//                  with token type ids (0 for A, 1 for B as the template says)
// Added tokens ([CLS], [SEP], [PAD], [MASK], ...) are matched in the raw text before normalisation.
// Unicode properties (categories, White_Space, NFD, lower case) come from ICU; lower-casing is per
// character (U+0130 becomes "i̇", a final Σ stays σ), as the Hugging Face implementation does.
// Tokenizer::from_json / from_file return a WordPieceTokenizer for such files.
// Thread-safety: a loaded tokenizer is immutable; every method is safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/tokenizer.h"

namespace ragd::engine {

// The model input of one text or text pair: ids with their token types.
struct EncoderInput {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;  // same length as ids
};

class WordPieceTokenizer : public Tokenizer {
 public:
  // Errors name the source and the field ("tokenizer.json: model.unk_token '[UNK]' is not in the
  // vocabulary").
  static Result<std::unique_ptr<WordPieceTokenizer>> from_json_wordpiece(std::string_view json,
                                                                          std::string_view source_name);
  static Result<std::unique_ptr<WordPieceTokenizer>> from_file_wordpiece(const std::string& path);
  // True when `json` is a tokenizer.json whose model.type is "WordPiece" (cheap check).
  static bool is_wordpiece_json(std::string_view json);

  // Tokenizer::encode: the WordPiece ids of `text`; add_bos applies the post-processor's single
  // template ([CLS] … [SEP]), untruncated.

  // Normalised words of `text` after the normaliser and pre-tokenizer (no added-token matching).
  virtual std::vector<std::string> pre_tokenize(std::string_view text) const = 0;
  // [CLS] text [SEP] (the single template); content tokens are cut so that the whole input has at
  // most max_len tokens (max_len <= 0: no limit).
  virtual EncoderInput encode_single(std::string_view text, int max_len) const = 0;
  // [CLS] a [SEP] b [SEP] (the pair template); over max_len tokens, tokens are removed from the end
  // of the longer part until both fit (the shorter keeps min(its length, budget / 2)).
  virtual EncoderInput encode_pair(std::string_view a, std::string_view b, int max_len) const = 0;
  // Special tokens the templates add around one text / a pair.
  virtual int special_tokens_single() const = 0;
  virtual int special_tokens_pair() const = 0;
  virtual int32_t unk_id() const = 0;
  virtual std::optional<int32_t> pad_id() const = 0;
};

// Builds a WordPiece tokenizer.json (BertNormalizer lower-casing with accent stripping,
// BertPreTokenizer, BertProcessing-style template) from a text sample, for random-weight encoder
// models: ids 0 [PAD], 1..99 [unusedN], 100 [UNK], 101 [CLS], 102 [SEP], 103 [MASK] (BERT's
// layout), then every character of the normalised sample alone and as "##c", then the sample's
// words by frequency (ties: alphabetical), then frequent word endings as "##suffix", then
// [unusedN] up to vocab_size. Deterministic.
struct WordPieceVocabOptions {
  int vocab_size = 30522;   // total ids (BERT's 30522 by default)
  int min_word_count = 2;   // words seen fewer times are spelled from pieces
};
Result<std::string> build_wordpiece_tokenizer_json(std::string_view sample, const WordPieceVocabOptions& opts);

}  // namespace ragd::engine

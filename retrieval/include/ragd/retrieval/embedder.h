// Embedders turn text into L2-normalised float vectors for inner-product search. Chosen by name:
//   "hashing" (default): signed feature hashing of lower-cased word unigrams and bigrams
//     (English stop words dropped from unigrams), sublinear tf (1 + ln tf), L2-normalised;
//     no model needed. Dimension configurable.
//   "model": final hidden states of a decoder loaded through the engine (engine::Model::embed),
//     pooled as the checkpoint's sentence-transformers files say (decoder embedders: last token,
//     with an EOS appended), mean-pooled when it has none; dimension = hidden_size.
//     When model_dir holds a BERT-family encoder (config.json BertModel / XLMRobertaModel ...),
//     "model" is the encoder embedder below (name "encoder" asks for it explicitly).
//   "termvec": a vector per stemmed term, trained here on Debian's documentation
//     (tools/train/termvec_train.py; models/ragd-termvec): a text is the sum of its terms' rows
//     weighted by 1 + ln tf, L2-normalised; terms as the lexical index generates them (Xapian's
//     English stemmer, STEM_ALL). Words with related meanings have nearby rows, so a query finds
//     passages that use other words for the same thing. Identity "termvec/<fingerprint>/d=256".
//     "model" with a directory whose config.json says model_type "ragd-termvec" is this one.
//   encoder: a BERT-family checkpoint (engine/bert_model.h) with its own WordPiece tokenizer.json,
//     pooled as its sentence-transformers files say (modules.json, 1_Pooling/config.json: CLS,
//     mean or last token; 2_Normalize; max_seq_length from sentence_bert_config.json, inputs
//     truncated to it), with optional query / document instruction prefixes; identity
//     "encoder/<fingerprint>/d=384/pool=cls/norm=1/max=512/prefix=<hash|none>".
// identity() names the embedder and every parameter that changes its output
// ("hashing-v2/d=384", "model/<fingerprint>/d=4096"): a corpus records it and refuses queries or
// ingests with another.
// Thread-safety: embed() is safe from any thread (the model embedder serialises on a mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/sentence_pooling.h"

namespace ragd::engine {
class Model;
class Tokenizer;
}  // namespace ragd::engine

namespace ragd::retrieval {

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual std::string_view name() const = 0;  // "hashing" | "termvec" | "model"
  virtual std::string identity() const = 0;
  virtual int dim() const = 0;
  // Writes one vector per text: out is resized to [texts.size(), dim()] row-major, each row
  // L2-normalised (an all-zero row stays zero, e.g. text without words).
  virtual Status embed(std::span<const std::string_view> texts, std::vector<float>* out) const = 0;
  // embed() for search queries: embedders with a query instruction prefix apply it here (documents
  // get the document prefix through embed()). Default: embed().
  virtual Status embed_queries(std::span<const std::string_view> texts, std::vector<float>* out) const {
    return embed(texts, out);
  }
};

struct HashingEmbedderOptions {
  int dim = 384;         // output dimension; default 384, must be in [16, 65536]
  bool bigrams = true;   // also hash adjacent word pairs; default on
};

Result<std::unique_ptr<Embedder>> make_hashing_embedder(const HashingEmbedderOptions& opts = {});

// The decoder embedder over a loaded model (Model::embed). Texts are encoded with BOS and cut to
// max_tokens; with last-token pooling (gte-Qwen2, Qwen3-Embedding, e5-mistral) the tokenizer's
// first EOS id ends every input (inside max_tokens) and its hidden state is the embedding. The
// prefixes work as the encoder's. Identity: "model/<fingerprint>/d=/max=" for mean pooling without
// prefixes (as before these options existed), else with "/pool=/eos=/prefix=" appended.
struct ModelEmbedderOptions {
  int max_tokens = 512;  // tokens embedded per text, EOS included; default 512, >= 2
  engine::SentencePooling pooling = engine::SentencePooling::kMean;
  std::string query_prefix;
  std::string document_prefix;
};
Result<std::unique_ptr<Embedder>> make_model_embedder(std::unique_ptr<engine::Model> model,
                                                      std::shared_ptr<const engine::Tokenizer> tokenizer,
                                                      const ModelEmbedderOptions& opts = {});

struct EmbedderOptions {
  std::string name = "hashing";  // "hashing" | "termvec" | "model" | "encoder"
  int dim = 384;                 // hashing only; default 384
  std::string model_dir;         // "model": HF directory with config.json + safetensors;
                                 // "termvec": its directory (config.json, vocab.txt, model.safetensors)
  int max_tokens = 512;          // "model" only: tokens embedded per text; default 512
  // Encoder checkpoints and decoder embedders (see above):
  std::string pooling;           // "" (default) = as 1_Pooling/config.json says (decoders without it:
                                 // mean); "cls" | "mean" | "lasttoken"
  std::string query_prefix;      // prepended to search queries, e.g. BGE's "Represent this sentence for
                                 // searching relevant passages: "; default none
  std::string document_prefix;   // prepended to ingested passages (E5: "passage: "); default none
  int batch_size = 32;           // texts per encoder forward pass; default 32
};

// True when dir/config.json describes a BERT-family encoder.
bool is_encoder_model_dir(const std::string& dir);
// The encoder embedder over opts.model_dir (errors name the file: config.json, model.safetensors,
// tokenizer.json, modules.json, 1_Pooling/config.json).
Result<std::unique_ptr<Embedder>> make_encoder_embedder(const EmbedderOptions& opts);

// True when dir/config.json says model_type "ragd-termvec".
bool is_termvec_model_dir(const std::string& dir);
// The term-vector embedder of `dir` (errors name the file: config.json, vocab.txt,
// model.safetensors, and what is wrong in it).
Result<std::unique_ptr<Embedder>> make_termvec_embedder(const std::string& dir);

// The term-vector model a new corpus gets when none is named (ragctl ingest): $RAGD_TERMVEC_DIR
// when set (and a termvec directory), else the repository's models/ragd-termvec; "" when neither
// is there (the hashing embedder then).
std::string default_termvec_dir();

// Builds an embedder by name. "model" loads the checkpoint in model_dir with the engine (CPU) and
// needs `tokenizer`. Unknown names are InvalidArgument listing the known ones.
Result<std::unique_ptr<Embedder>> make_embedder(const EmbedderOptions& opts,
                                                std::shared_ptr<const engine::Tokenizer> tokenizer);

// Lower-cased words of `text` as the hashing embedder sees them (letters, digits and any non-ASCII
// UTF-8 sequence form words). Exposed for tests.
std::vector<std::string> hashing_words(std::string_view text);

}  // namespace ragd::retrieval

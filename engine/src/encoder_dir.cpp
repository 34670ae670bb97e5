#include "ragd/common/text_file.h"
#include "ragd/engine/encoder_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "ragd/engine/sentence_pooling.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/engine/wordpiece.h"

namespace ragd::engine {

namespace {

namespace fs = std::filesystem;


}  // namespace

Status write_random_encoder_dir(const std::string& dir_name, const EncoderDirOptions& o) {
  const BertConfig& c = o.config;
  RAGD_RETURN_IF_ERROR(c.validate());
  if (o.pooling != "cls" && o.pooling != "mean" && o.pooling != "lasttoken")
    return Status::InvalidArgument(fmt::format("pooling '{}' is not one of cls, mean, lasttoken", o.pooling));
  std::error_code ec;
  const fs::path dir(dir_name);
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot create directory: {}", dir_name, ec.message()));

  WordPieceVocabOptions vo;
  vo.vocab_size = c.vocab_size;
  RAGD_ASSIGN_OR_RETURN(std::string tok_json, build_wordpiece_tokenizer_json(builtin_training_text(), vo));
  RAGD_RETURN_IF_ERROR(write_text_file((dir / "tokenizer.json").string(), tok_json));
  const int max_len = std::min(o.max_seq_length, c.max_tokens());
  RAGD_RETURN_IF_ERROR(write_text_file(
      (dir / "tokenizer_config.json").string(),
      fmt::format("{{\n  \"tokenizer_class\": \"BertTokenizer\",\n  \"do_lower_case\": true,\n  \"cls_token\": \"[CLS]\",\n"
                  "  \"sep_token\": \"[SEP]\",\n  \"pad_token\": \"[PAD]\",\n  \"unk_token\": \"[UNK]\",\n"
                  "  \"mask_token\": \"[MASK]\",\n  \"model_max_length\": {}\n}}\n",
                  max_len)));
  BertConfig stored = c;
  RAGD_RETURN_IF_ERROR(write_text_file((dir / "config.json").string(), stored.to_json()));

  auto tensors = random_bert_tensors(c, o.seed);
  if (c.is_classifier()) {  // HF names of BertForSequenceClassification: the encoder under "bert."
    std::map<std::string, OwnedTensor> named;
    for (auto& [k, t] : tensors)
      named.emplace(k.starts_with("classifier.") ? k : "bert." + k, std::move(t));
    tensors = std::move(named);
  }
  if (o.dtype != DType::kF32) {
    for (auto& [k, t] : tensors) {
      const size_t n = t.bytes.size() / sizeof(float);
      std::vector<uint8_t> out(n * dtype_size(o.dtype));
      convert_from_f32(reinterpret_cast<const float*>(t.bytes.data()), n, o.dtype, out.data());
      t.bytes = std::move(out);
      t.dtype = o.dtype;
    }
  }
  RAGD_RETURN_IF_ERROR(write_safetensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}}));
  if (c.is_classifier()) return Status::OK();

  RAGD_ASSIGN_OR_RETURN(SentencePooling pooling, parse_sentence_pooling(o.pooling));
  return write_sentence_pooling(dir_name, c.hidden_size, {.pooling = pooling, .normalize = o.normalize, .max_seq_length = max_len});
}

}  // namespace ragd::engine

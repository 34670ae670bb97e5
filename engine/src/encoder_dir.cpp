#include "ragd/engine/encoder_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "ragd/engine/tokenizer.h"
#include "ragd/engine/wordpiece.h"

namespace ragd::engine {

namespace {

namespace fs = std::filesystem;

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream o(path, std::ios::binary);
  o << text;
  o.close();
  if (!o) return Status::IOError(fmt::format("{}: write failed", path.string()));
  return Status::OK();
}

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
  RAGD_RETURN_IF_ERROR(write_text(dir / "tokenizer.json", tok_json));
  const int max_len = std::min(o.max_seq_length, c.max_tokens());
  RAGD_RETURN_IF_ERROR(write_text(
      dir / "tokenizer_config.json",
      fmt::format("{{\n  \"tokenizer_class\": \"BertTokenizer\",\n  \"do_lower_case\": true,\n  \"cls_token\": \"[CLS]\",\n"
                  "  \"sep_token\": \"[SEP]\",\n  \"pad_token\": \"[PAD]\",\n  \"unk_token\": \"[UNK]\",\n"
                  "  \"mask_token\": \"[MASK]\",\n  \"model_max_length\": {}\n}}\n",
                  max_len)));
  BertConfig stored = c;
  RAGD_RETURN_IF_ERROR(write_text(dir / "config.json", stored.to_json()));

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

  std::string modules =
      "[\n  {\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},\n"
      "  {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}";
  if (o.normalize)
    modules += ",\n  {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}";
  RAGD_RETURN_IF_ERROR(write_text(dir / "modules.json", modules + "\n]\n"));
  fs::create_directories(dir / "1_Pooling", ec);
  if (o.normalize) fs::create_directories(dir / "2_Normalize", ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot create module directories: {}", dir_name, ec.message()));
  RAGD_RETURN_IF_ERROR(write_text(
      dir / "1_Pooling" / "config.json",
      fmt::format("{{\n  \"word_embedding_dimension\": {},\n  \"pooling_mode_cls_token\": {},\n"
                  "  \"pooling_mode_mean_tokens\": {},\n  \"pooling_mode_max_tokens\": false,\n"
                  "  \"pooling_mode_mean_sqrt_len_tokens\": false,\n  \"pooling_mode_weightedmean_tokens\": false,\n"
                  "  \"pooling_mode_lasttoken\": {}\n}}\n",
                  c.hidden_size, o.pooling == "cls", o.pooling == "mean", o.pooling == "lasttoken")));
  RAGD_RETURN_IF_ERROR(write_text(dir / "sentence_bert_config.json",
                                  fmt::format("{{\n  \"max_seq_length\": {},\n  \"do_lower_case\": false\n}}\n", max_len)));
  return Status::OK();
}

}  // namespace ragd::engine

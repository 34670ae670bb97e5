// sentence-transformers pooling files (sentence_pooling.h).
#include "ragd/engine/sentence_pooling.h"

#include <algorithm>
#include <filesystem>
#include <vector>
#include <fstream>

#include <fmt/format.h>
#include <simdjson.h>

#include "ragd/common/text_file.h"

namespace ragd::engine {
namespace {

namespace fs = std::filesystem;



}  // namespace

Status write_sentence_pooling(const std::string& dir_name, int hidden_size, const PoolingSpec& spec) {
  const fs::path dir(dir_name);
  std::string modules =
      "[\n  {\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},\n"
      "  {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}";
  if (spec.normalize)
    modules += ",\n  {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}";
  RAGD_RETURN_IF_ERROR(write_text_file((dir / "modules.json").string(), modules + "\n]\n"));
  std::error_code ec;
  fs::create_directories(dir / "1_Pooling", ec);
  if (spec.normalize && !ec) fs::create_directories(dir / "2_Normalize", ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot create module directories: {}", dir_name, ec.message()));
  const SentencePooling p = spec.pooling;
  RAGD_RETURN_IF_ERROR(write_text_file(
      (dir / "1_Pooling" / "config.json").string(),
      fmt::format("{{\n  \"word_embedding_dimension\": {},\n  \"pooling_mode_cls_token\": {},\n"
                  "  \"pooling_mode_mean_tokens\": {},\n  \"pooling_mode_max_tokens\": false,\n"
                  "  \"pooling_mode_mean_sqrt_len_tokens\": false,\n  \"pooling_mode_weightedmean_tokens\": false,\n"
                  "  \"pooling_mode_lasttoken\": {}\n}}\n",
                  hidden_size, p == SentencePooling::kCls, p == SentencePooling::kMean, p == SentencePooling::kLastToken)));
  if (spec.max_seq_length > 0)
    RAGD_RETURN_IF_ERROR(write_text_file((dir / "sentence_bert_config.json").string(),
                                    fmt::format("{{\n  \"max_seq_length\": {},\n  \"do_lower_case\": false\n}}\n",
                                                spec.max_seq_length)));
  return Status::OK();
}

std::string_view sentence_pooling_name(SentencePooling p) {
  switch (p) {
    case SentencePooling::kCls: return "cls";
    case SentencePooling::kMean: return "mean";
    case SentencePooling::kLastToken: return "lasttoken";
  }
  return "?";
}

void pool_hidden_states(const float* hidden, int rows, int dim, SentencePooling pooling, float* out) {
  const size_t d = static_cast<size_t>(dim);
  switch (pooling) {
    case SentencePooling::kCls: std::copy_n(hidden, d, out); return;
    case SentencePooling::kLastToken: std::copy_n(hidden + static_cast<size_t>(rows - 1) * d, d, out); return;
    case SentencePooling::kMean: {
      std::vector<double> acc(d, 0.0);
      for (int t = 0; t < rows; ++t)
        for (size_t k = 0; k < d; ++k) acc[k] += hidden[static_cast<size_t>(t) * d + k];
      for (size_t k = 0; k < d; ++k) out[k] = static_cast<float>(acc[k] / static_cast<double>(rows));
      return;
    }
  }
}

Result<SentencePooling> parse_sentence_pooling(std::string_view name) {
  for (SentencePooling p : {SentencePooling::kCls, SentencePooling::kMean, SentencePooling::kLastToken})
    if (name == sentence_pooling_name(p)) return p;
  return Status::InvalidArgument(fmt::format("pooling '{}' is not one of cls, mean, lasttoken", name));
}

bool has_sentence_pooling(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / "modules.json", ec);
}

Result<PoolingSpec> read_sentence_pooling(const std::string& dir_name) {
  const fs::path dir(dir_name);
  PoolingSpec spec;
  const fs::path modules_path = dir / "modules.json";
  RAGD_ASSIGN_OR_RETURN(std::string modules,
                        read_text_file(modules_path.string(), "sentence-transformers modules file (or set the pooling option)"));
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  if (p.parse(modules).get(doc) != simdjson::SUCCESS || !doc.is_array())
    return Status::InvalidArgument(fmt::format("{}: not a JSON list of modules", modules_path.string()));
  std::string pooling_dir;
  bool have_pooling = false;
  spec.normalize = false;
  for (auto m : doc.get_array()) {
    std::string_view type, path;
    if (m["type"].get_string().get(type) != simdjson::SUCCESS) continue;
    if (m["path"].get_string().get(path) != simdjson::SUCCESS) path = {};
    if (type.ends_with(".Pooling")) {
      have_pooling = true;
      pooling_dir = std::string(path);
    } else if (type.ends_with(".Normalize")) {
      spec.normalize = true;
    } else if (!type.ends_with(".Transformer")) {
      return Status::InvalidArgument(
          fmt::format("{}: module '{}' is not supported (Transformer, Pooling, Normalize)", modules_path.string(), type));
    }
  }
  if (!have_pooling)
    return Status::InvalidArgument(fmt::format("{}: no sentence_transformers.models.Pooling module", modules_path.string()));
  const fs::path pool_path = dir / pooling_dir / "config.json";
  RAGD_ASSIGN_OR_RETURN(std::string pool, read_text_file(pool_path.string(), "pooling config"));
  simdjson::dom::parser p2;
  simdjson::dom::element pc;
  if (p2.parse(pool).get(pc) != simdjson::SUCCESS)
    return Status::InvalidArgument(fmt::format("{}: invalid JSON", pool_path.string()));
  auto flag = [&](const char* name) {
    bool b = false;
    return pc[name].get_bool().get(b) == simdjson::SUCCESS && b;
  };
  int modes = 0;
  if (flag("pooling_mode_cls_token")) spec.pooling = SentencePooling::kCls, ++modes;
  if (flag("pooling_mode_mean_tokens")) spec.pooling = SentencePooling::kMean, ++modes;
  if (flag("pooling_mode_lasttoken")) spec.pooling = SentencePooling::kLastToken, ++modes;
  for (const char* other : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"})
    if (flag(other))
      return Status::InvalidArgument(fmt::format("{}: {} is not supported (cls, mean, lasttoken)", pool_path.string(), other));
  if (modes != 1)
    return Status::InvalidArgument(fmt::format("{}: exactly one pooling mode must be set (found {})", pool_path.string(), modes));
  const fs::path sb = dir / "sentence_bert_config.json";
  if (fs::exists(sb)) {
    RAGD_ASSIGN_OR_RETURN(std::string sbt, read_text_file(sb.string(), "sentence-transformers config"));
    simdjson::dom::parser p3;
    simdjson::dom::element sc;
    if (p3.parse(sbt).get(sc) != simdjson::SUCCESS)
      return Status::InvalidArgument(fmt::format("{}: invalid JSON", sb.string()));
    int64_t n = 0;
    if (sc["max_seq_length"].get_int64().get(n) == simdjson::SUCCESS && n > 0) spec.max_seq_length = static_cast<int>(n);
  }
  return spec;
}

}  // namespace ragd::engine

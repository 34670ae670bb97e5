#include "ragd/pipelines/pipeline_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "adapt_spec.h"
#include "toml_parse.h"

namespace ragd::pipelines {

PipelineInfo PipelineSpec::info() const {
  PipelineInfo i;
  i.name = name;
  i.description = description;
  i.reuse = std::string(reuse_mode_name(reuse));
  i.top_k = top_k;
  i.index = index;
  i.max_tokens = max_tokens;
  i.number_passages = number_passages;
  i.sources_footer = sources_footer;
  if (iterative) {
    i.kind = "iterative";
    i.overlap = std::string(overlap_name(iterative->overlap));
    i.retrieval_interval = iterative->retrieval_interval;
  }
  if (adapt) {
    for (const auto& c : adapt->candidates) i.adapt_candidates.push_back(c.name);
    i.adapt_objective = std::string(enum_name(adapt->objective));
    i.adapt_slo_ttft_ms = adapt->slo_ttft_ms;
  }
  return i;
}

PipelineSpec default_pipeline_spec() { return PipelineSpec{}; }

namespace {

class Reader {
 public:
  Reader(const toml::table& root, std::string_view src) : root_(root), src_(src) {}

  Status check_keys() const {
    static const std::map<std::string, std::set<std::string>> kAllowed = {
        {"pipeline", {"name", "description"}},
        {"retriever", {"top_k", "index", "nprobe", "speculative_prefill", "rerank", "rerank_model", "mode", "min_score_ratio"}},
        {"prompt", {"system", "context_header", "separator", "question_prefix", "chat_template", "number_passages", "sources_footer"}},
        {"reuse", {"mode", "recompute_ratio", "epic_k"}},
        {"iterative", {"retrieval_interval", "query_window", "overlap", "speculation_cache", "max_stride",
                       "max_nprobe", "query_lag"}},
        {"generation", {"max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "extractive", "speculative_k", "speculative"}},
        {"adapt", {"objective", "slo_ttft_ms", "quality_tolerance", "candidates", "profile"}},
        {"semantic_cache", {"threshold", "grounding", "grounding_max_share"}},
    };
    for (const auto& [k, v] : root_) {
      const std::string key(k.str());
      auto it = kAllowed.find(key);
      if (it == kAllowed.end()) return err("unknown table [" + key + "]");
      if (!v.is_table()) return err("'" + key + "' must be a table");
      for (const auto& [k2, v2] : *v.as_table())
        if (!it->second.count(std::string(k2.str())))
          return err("[" + key + "] unknown key '" + std::string(k2.str()) + "'");
    }
    return Status::OK();
  }

  Status str(const char* table, const char* key, std::string* out) const {
    const toml::node* n = find(table, key);
    if (!n) return Status::OK();
    if (!n->is_string()) return field_err(table, key, "must be a string");
    *out = n->as_string()->get();
    return Status::OK();
  }
  Status integer(const char* table, const char* key, int64_t lo, int64_t hi, int64_t* out) const {
    const toml::node* n = find(table, key);
    if (!n) return Status::OK();
    if (!n->is_integer()) return field_err(table, key, "must be an integer");
    const int64_t v = n->as_integer()->get();
    if (v < lo || v > hi)
      return field_err(table, key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                       std::to_string(v));
    *out = v;
    return Status::OK();
  }
  Status integer(const char* table, const char* key, const ParamRange& range, int64_t* out) const {
    return integer(table, key, static_cast<int64_t>(range.lo), static_cast<int64_t>(range.hi), out);
  }
  Status real(const char* table, const char* key, const ParamRange& range, double* out) const {
    return real(table, key, range.lo, range.hi, out);
  }
  Status real(const char* table, const char* key, double lo, double hi, double* out) const {
    const toml::node* n = find(table, key);
    if (!n) return Status::OK();
    double v;
    if (n->is_floating_point()) v = n->as_floating_point()->get();
    else if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else return field_err(table, key, "must be a number");
    if (!(v >= lo && v <= hi)) {
      std::ostringstream os;
      os << "must be in [" << lo << ", " << hi << "], got " << v;
      return field_err(table, key, os.str());
    }
    *out = v;
    return Status::OK();
  }
  Status boolean(const char* table, const char* key, bool* out) const {
    const toml::node* n = find(table, key);
    if (!n) return Status::OK();
    if (!n->is_boolean()) return field_err(table, key, "must be true or false");
    *out = n->as_boolean()->get();
    return Status::OK();
  }
  Status strings(const char* table, const char* key, std::vector<std::string>* out) const {
    const toml::node* n = find(table, key);
    if (!n) return Status::OK();
    if (!n->is_array()) return field_err(table, key, "must be an array of strings");
    out->clear();
    for (const auto& e : *n->as_array()) {
      if (!e.is_string()) return field_err(table, key, "must be an array of strings");
      out->push_back(e.as_string()->get());
    }
    return Status::OK();
  }
  Status field_err(const char* table, const char* key, const std::string& what) const {
    return err(std::string("[") + table + "] " + key + ": " + what);
  }
  Status err(const std::string& what) const { return Status::InvalidArgument(std::string(src_) + ": " + what); }
  // The node at [table] key; null when absent.
  const toml::node* find(const char* table, const char* key) const {
    const toml::node* t = root_.get(table);
    if (!t || !t->is_table()) return nullptr;
    return t->as_table()->get(key);
  }

 private:
  const toml::table& root_;
  std::string_view src_;
};

}  // namespace

Result<PipelineSpec> parse_pipeline_spec(std::string_view toml_text, std::string_view source_name,
                                         std::string_view default_name) {
  RAGD_ASSIGN_OR_RETURN(toml::table root, parse_toml(toml_text, source_name));
  Reader r(root, source_name);
  RAGD_RETURN_IF_ERROR(r.check_keys());
  PipelineSpec s;
  s.name = std::string(default_name);
  RAGD_RETURN_IF_ERROR(r.str("pipeline", "name", &s.name));
  if (s.name.empty() || s.name.size() > 64 ||
      !std::all_of(s.name.begin(), s.name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }))
    return r.field_err("pipeline", "name", "must be 1-64 characters of [A-Za-z0-9._-], got '" + s.name + "'");
  RAGD_RETURN_IF_ERROR(r.str("pipeline", "description", &s.description));
  int64_t v = s.top_k;
  RAGD_RETURN_IF_ERROR(r.integer("retriever", "top_k", ParamRange{0, kRangeRetrievalTopK.hi}, &v));
  s.top_k = static_cast<int>(v);
  RAGD_RETURN_IF_ERROR(r.str("retriever", "index", &s.index));
  {
    std::string mode(enum_name(s.retrieval_mode));
    RAGD_RETURN_IF_ERROR(r.str("retriever", "mode", &mode));
    auto m = parse_enum<retrieval::RetrievalMode>(mode);
    if (!m.ok()) return r.field_err("retriever", "mode", m.status().message());
    s.retrieval_mode = *m;
  }
  v = s.nprobe;
  RAGD_RETURN_IF_ERROR(r.integer("retriever", "nprobe", 1, 65536, &v));
  s.nprobe = static_cast<int>(v);
  RAGD_RETURN_IF_ERROR(r.boolean("retriever", "speculative_prefill", &s.speculative_prefill));
  RAGD_RETURN_IF_ERROR(r.real("retriever", "min_score_ratio", kRangeScoreRatio, &s.min_score_ratio));
  v = s.rerank;
  RAGD_RETURN_IF_ERROR(r.integer("retriever", "rerank", ParamRange{0, kRangeRetrievalTopK.hi}, &v));
  s.rerank = static_cast<int>(v);
  if (s.rerank > s.top_k)
    return r.field_err("retriever", "rerank", "keeps " + std::to_string(s.rerank) + " of top_k " + std::to_string(s.top_k) +
                                                  " passages: it must not exceed top_k");
  if (s.rerank > 0 && s.speculative_prefill)
    return r.field_err("retriever", "rerank", "reranking needs the final search result: it cannot be combined with "
                                              "speculative_prefill");
  RAGD_RETURN_IF_ERROR(r.str("retriever", "rerank_model", &s.rerank_model));
  RAGD_RETURN_IF_ERROR(r.str("prompt", "system", &s.system_prompt));
  RAGD_RETURN_IF_ERROR(r.str("prompt", "context_header", &s.context_header));
  RAGD_RETURN_IF_ERROR(r.str("prompt", "separator", &s.separator));
  RAGD_RETURN_IF_ERROR(r.str("prompt", "question_prefix", &s.question_prefix));
  RAGD_RETURN_IF_ERROR(r.boolean("prompt", "number_passages", &s.number_passages));
  RAGD_RETURN_IF_ERROR(r.boolean("prompt", "sources_footer", &s.sources_footer));
  RAGD_RETURN_IF_ERROR(r.str("prompt", "chat_template", &s.chat_template));
  // "model" (the model's own template, else as "auto"), "auto" (a built-in picked by the tokenizer;
  // PromptBuilder) or a name of engine's built-in chat template table.
  if (s.chat_template != "model" && s.chat_template != "auto" && !engine::parse_chat_template(s.chat_template).ok())
    return r.field_err("prompt", "chat_template",
                       "must be one of model | auto | " + enum_choices<engine::ChatTemplate>() + "; got '" +
                           s.chat_template + "'");
  std::string mode(reuse_mode_name(s.reuse));
  RAGD_RETURN_IF_ERROR(r.str("reuse", "mode", &mode));
  auto m = parse_reuse_mode(mode);
  if (!m.ok()) return r.field_err("reuse", "mode", m.status().message());
  s.reuse = *m;
  RAGD_RETURN_IF_ERROR(r.real("reuse", "recompute_ratio", kRangeRecomputeRatio, &s.blend.recompute_ratio));
  v = s.blend.epic_k;
  RAGD_RETURN_IF_ERROR(r.integer("reuse", "epic_k", kRangeEpicK, &v));
  s.blend.epic_k = static_cast<int>(v);
  if (root.get("iterative")) {
    IterativeParams it;
    auto field = [&](const char* key, int lo, int hi, int* out) -> Status {
      int64_t x = *out;
      RAGD_RETURN_IF_ERROR(r.integer("iterative", key, lo, hi, &x));
      *out = static_cast<int>(x);
      return Status::OK();
    };
    RAGD_RETURN_IF_ERROR(field("retrieval_interval", static_cast<int>(kRangeRetrievalInterval.lo), static_cast<int>(kRangeRetrievalInterval.hi), &it.retrieval_interval));
    RAGD_RETURN_IF_ERROR(field("query_window", 0, 4096, &it.query_window));
    RAGD_RETURN_IF_ERROR(field("speculation_cache", 1, 256, &it.speculation_cache));
    RAGD_RETURN_IF_ERROR(field("max_stride", 1, 64, &it.max_stride));
    RAGD_RETURN_IF_ERROR(field("max_nprobe", 0, 65536, &it.max_nprobe));
    RAGD_RETURN_IF_ERROR(field("query_lag", 0, 64, &it.query_lag));
    std::string ov(overlap_name(it.overlap));
    RAGD_RETURN_IF_ERROR(r.str("iterative", "overlap", &ov));
    auto o = parse_overlap(ov);
    if (!o.ok()) return r.field_err("iterative", "overlap", o.status().message());
    it.overlap = *o;
    if (s.top_k == 0) return r.field_err("iterative", "retrieval_interval", "an iterative pipeline needs [retriever] top_k > 0");
    if (s.rerank > 0) return r.field_err("retriever", "rerank", "reranking is for one-shot pipelines, not iterative ones");
    s.iterative = it;
  }
  v = s.max_tokens;
  RAGD_RETURN_IF_ERROR(r.integer("generation", "max_tokens", kRangeMaxTokens, &v));
  s.max_tokens = static_cast<int>(v);
  double d = s.temperature;
  RAGD_RETURN_IF_ERROR(r.real("generation", "temperature", kRangeTemperature, &d));
  s.temperature = static_cast<float>(d);
  d = s.top_p;
  RAGD_RETURN_IF_ERROR(r.real("generation", "top_p", kRangeTopP, &d));
  s.top_p = static_cast<float>(d);
  v = s.sampling_top_k;
  RAGD_RETURN_IF_ERROR(r.integer("generation", "top_k", kRangeSamplingTopK, &v));
  s.sampling_top_k = static_cast<int>(v);
  v = 0;
  RAGD_RETURN_IF_ERROR(r.integer("generation", "seed", 0, INT64_MAX, &v));
  s.seed = static_cast<uint64_t>(v);
  RAGD_RETURN_IF_ERROR(r.strings("generation", "stop", &s.stop));
  RAGD_RETURN_IF_ERROR(r.boolean("generation", "extractive", &s.extractive));
  v = -1;
  RAGD_RETURN_IF_ERROR(r.integer("generation", "speculative_k", kRangeSpeculativeK, &v));
  if (v >= 0) s.speculative_k = static_cast<int>(v);
  if (const toml::node* sp = r.find("generation", "speculative")) {
    // speculative = { method = "ngram" | "draft", k = N, draft_model = "DIR" }
    const toml::table* t = sp->as_table();
    if (!t) return r.field_err("generation", "speculative", "must be a table { method, k, draft_model }");
    for (const auto& [key, val] : *t) {
      const std::string name(key.str());
      if (name == "method") {
        if (!val.is_string()) return r.field_err("generation", "speculative", "method must be a string");
        auto m = parse_draft_method(val.as_string()->get());
        if (!m.ok()) return r.field_err("generation", "speculative", m.status().message());
        s.speculative_method = *m;
      } else if (name == "k") {
        const auto k = val.value<int64_t>();
        if (!val.is_integer() || !k || *k < kRangeSpeculativeK.lo || *k > kRangeSpeculativeK.hi)
          return r.field_err("generation", "speculative", "k must be an integer in 0..16");
        if (s.speculative_k && *s.speculative_k != *k)
          return r.field_err("generation", "speculative", "k and speculative_k disagree");
        s.speculative_k = static_cast<int>(*k);
      } else if (name == "draft_model") {
        if (!val.is_string() || val.as_string()->get().empty())
          return r.field_err("generation", "speculative", "draft_model must be a model directory");
        s.draft_model = val.as_string()->get();
      } else {
        return r.field_err("generation", "speculative", "unknown key '" + name + "' (method, k, draft_model)");
      }
    }
    if (!s.draft_model.empty() && s.speculative_method.value_or(DraftMethod::kDraft) != DraftMethod::kDraft)
      return r.field_err("generation", "speculative", "draft_model is for method \"draft\"");
    if (!s.draft_model.empty()) s.speculative_method = DraftMethod::kDraft;
  }
  if (root.get("semantic_cache")) {
    PipelineSpec::SemanticCacheSpec sc;
    RAGD_RETURN_IF_ERROR(r.real("semantic_cache", "threshold", ParamRange{0.0, 1.0}, &sc.threshold));
    RAGD_RETURN_IF_ERROR(r.boolean("semantic_cache", "grounding", &sc.grounding));
    RAGD_RETURN_IF_ERROR(r.real("semantic_cache", "grounding_max_share", ParamRange{0.0, 1.0}, &sc.grounding_max_share));
    if (s.iterative) return r.field_err("semantic_cache", "threshold", "a semantic cache is for one-shot pipelines, not iterative ones");
    s.semantic_cache = sc;
  }
  if (const toml::node* a = root.get("adapt")) {
    RAGD_ASSIGN_OR_RETURN(AdaptSpec adapt, parse_adapt_table(*a->as_table(), source_name, s.iterative.has_value()));
    if (s.speculative_prefill)
      return r.field_err("retriever", "speculative_prefill", "an adaptive pipeline ([adapt]) chooses after the search: "
                                                             "it cannot be combined with speculative_prefill");
    s.adapt = std::move(adapt);
  }
  const bool any_rerank = s.rerank > 0 || (s.adapt && std::any_of(s.adapt->candidates.begin(), s.adapt->candidates.end(),
                                                                   [](const AdaptCandidate& c) { return c.rerank > 0; }));
  if (!s.rerank_model.empty() && !any_rerank)
    return r.field_err("retriever", "rerank_model",
                       "names a cross-encoder, but nothing reranks: set rerank > 0 (or an [adapt] candidate's rerank)");
  return s;
}

namespace {

// An adaptive pipeline's fitted profile: [adapt] profile (relative to the spec's directory), or
// "<stem>.profile" beside the spec when that file exists.
Status load_adapt_profile(const std::string& spec_path, AdaptSpec* adapt) {
  const std::filesystem::path sp(spec_path);
  const bool named = !adapt->profile_file.empty();
  const std::filesystem::path file =
      sp.parent_path() / (named ? std::filesystem::path(adapt->profile_file) : sp.stem().concat(".profile"));
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    if (named) return Status::NotFound(spec_path + ": [adapt] profile: " + file.string() + " does not exist");
    return Status::OK();
  }
  std::ifstream f(file, std::ios::binary);
  if (!f) return Status::IOError(file.string() + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  RAGD_ASSIGN_OR_RETURN(adapt->profile, parse_adapt_profile(ss.str(), file.string()));
  for (const auto& [name, m] : adapt->profile.models)
    if (!adapt->find(name))
      return Status::InvalidArgument(file.string() + ": [candidates." + name + "] names no candidate of " + spec_path);
  adapt->profile_file = file.string();
  return Status::OK();
}

}  // namespace

Result<PipelineSpec> load_pipeline_spec(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound(path + ": cannot open pipeline spec");
  std::stringstream ss;
  ss << f.rdbuf();
  RAGD_ASSIGN_OR_RETURN(PipelineSpec s, parse_pipeline_spec(ss.str(), path, std::filesystem::path(path).stem().string()));
  if (s.adapt) RAGD_RETURN_IF_ERROR(load_adapt_profile(path, &*s.adapt));
  // A relative cross-encoder directory is relative to the spec's directory.
  if (!s.rerank_model.empty() && std::filesystem::path(s.rerank_model).is_relative())
    s.rerank_model = (std::filesystem::path(path).parent_path() / s.rerank_model).lexically_normal().string();
  return s;
}

Result<std::vector<PipelineSpec>> load_pipeline_dir(const std::string& dir) {
  std::vector<PipelineSpec> out;
  std::map<std::string, std::string> seen;  // name -> file
  if (!dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      return Status::NotFound(dir + ": pipelines directory does not exist");
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.is_regular_file() && e.path().extension() == ".toml") files.push_back(e.path().string());
    if (ec) return Status::IOError(dir + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      RAGD_ASSIGN_OR_RETURN(PipelineSpec s, load_pipeline_spec(f));
      auto [it, fresh] = seen.emplace(s.name, f);
      if (!fresh) return Status::InvalidArgument(f + ": pipeline name '" + s.name + "' already defined in " + it->second);
      out.push_back(std::move(s));
    }
  }
  if (!seen.count("default")) out.insert(out.begin(), default_pipeline_spec());
  return out;
}

}  // namespace ragd::pipelines

// ragctl search "text" [-k 5] [--data DIR] [--json]: nearest chunks of a corpus with score, source,
// chunk offsets and a snippet. Opens the data directory read-only, so it works beside a running
// writer.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "command.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/corpus.h"
#include "ragd/retrieval/text_util.h"

namespace ragd::tools {
namespace {

using namespace ragd::retrieval;

struct SearchArgs {
  std::string query;
  int k = 5;
  std::string data;
  std::string model;
  bool json = false;
  int nprobe = 0;
  int ef_search = 0;
  int snippet = 240;
};

// Whitespace collapsed, cut at `max` bytes on a UTF-8 boundary.
std::string snippet_of(const std::string& text, int max) {
  std::string s;
  for (char c : text) {
    if (is_space_byte(static_cast<unsigned char>(c))) {
      if (!s.empty() && s.back() != ' ') s.push_back(' ');
    } else {
      s.push_back(c);
    }
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.size() > static_cast<size_t>(max)) {
    s.resize(utf8_floor(s, static_cast<size_t>(max)));
    s += "...";
  }
  return s;
}

int run_search(const SearchArgs& a) {
  const char* env_data = std::getenv("RAGD_DATA");
  std::string data = !a.data.empty() ? a.data : (env_data && *env_data ? env_data : "./data");
  const char* env_model = std::getenv("RAGD_MODEL");
  std::string model = !a.model.empty() ? a.model : (env_model && *env_model ? env_model : "./data/model");
  // The tokenizer only matters for the "model" embedder; the hashing embedder needs none.
  std::shared_ptr<const engine::Tokenizer> tok;
  if (std::filesystem::exists(model + "/tokenizer.json")) {
    auto t = engine::Tokenizer::from_file(model + "/tokenizer.json");
    if (t.ok()) tok = std::move(t).value();
  }
  CorpusOptions o;
  o.read_only = true;
  o.embedder.model_dir = "";
  auto c = Corpus::open(data, o, tok);
  if (!c.ok()) {
    std::fprintf(stderr, "ragctl search: %s\n", c.status().to_string().c_str());
    return 1;
  }
  SearchParams sp;
  sp.nprobe = a.nprobe;
  sp.ef_search = a.ef_search;
  auto hits = (*c)->search(a.query, a.k, retrieval::ReadScope::everything(), sp);
  if (!hits.ok()) {
    std::fprintf(stderr, "ragctl search: %s\n", hits.status().to_string().c_str());
    return hits.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (a.json) {
    std::string out = "{\"query\":";
    append_json_string(&out, a.query);
    out += ",\"hits\":[";
    for (size_t i = 0; i < hits->size(); ++i) {
      const Hit& h = (*hits)[i];
      if (i) out += ',';
      char num[256];
      std::snprintf(num, sizeof num,
                    "{\"rank\":%zu,\"score\":%.6f,\"chunk_id\":%llu,\"chunk_index\":%u,\"byte_begin\":%llu,"
                    "\"byte_end\":%llu,\"token_begin\":%llu,\"token_end\":%llu,",
                    i + 1, static_cast<double>(h.score), static_cast<unsigned long long>(h.chunk.id), h.chunk.index,
                    static_cast<unsigned long long>(h.chunk.byte_begin), static_cast<unsigned long long>(h.chunk.byte_end),
                    static_cast<unsigned long long>(h.chunk.token_begin),
                    static_cast<unsigned long long>(h.chunk.token_end));
      out += num;
      out += "\"doc_id\":";
      append_json_string(&out, h.chunk.doc_id);
      out += ",\"source\":";
      append_json_string(&out, h.source);
      out += ",\"title\":";
      append_json_string(&out, h.title);
      out += ",\"snippet\":";
      append_json_string(&out, snippet_of(h.chunk.text, a.snippet));
      out += ",\"text\":";
      append_json_string(&out, h.chunk.text);
      out += '}';
    }
    out += "]}\n";
    std::fputs(out.c_str(), stdout);
    return 0;
  }
  if (hits->empty()) {
    std::printf("no hits (the corpus has %llu chunks)\n", static_cast<unsigned long long>((*c)->stats().chunks));
    return 0;
  }
  for (size_t i = 0; i < hits->size(); ++i) {
    const Hit& h = (*hits)[i];
    std::printf("%zu. %.4f  %s  [chunk %llu #%u, bytes %llu-%llu, tokens %llu-%llu]\n", i + 1,
                static_cast<double>(h.score), h.source.c_str(), static_cast<unsigned long long>(h.chunk.id),
                h.chunk.index, static_cast<unsigned long long>(h.chunk.byte_begin),
                static_cast<unsigned long long>(h.chunk.byte_end), static_cast<unsigned long long>(h.chunk.token_begin),
                static_cast<unsigned long long>(h.chunk.token_end));
    if (!h.title.empty()) std::printf("   %s\n", h.title.c_str());
    std::printf("   %s\n", snippet_of(h.chunk.text, a.snippet).c_str());
  }
  return 0;
}

Registration reg("search", "nearest chunks of an ingested corpus, with scores, sources and snippets",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<SearchArgs>();
                   sub.add_option("query", a->query, "query text")->required();
                   sub.add_option("-k", a->k, "hits to return")->capture_default_str();
                   sub.add_option("--data", a->data, "data directory (default $RAGD_DATA or ./data)");
                   sub.add_option("--model", a->model, "model directory (only for the 'model' embedder)");
                   sub.add_flag("--json", a->json, "JSON output");
                   sub.add_option("--nprobe", a->nprobe, "IVF lists to scan (default: the index's)");
                   sub.add_option("--ef-search", a->ef_search, "HNSW candidate list (default: the index's)");
                   sub.add_option("--snippet", a->snippet, "snippet length in bytes")->capture_default_str();
                   return [a]() { return run_search(*a); };
                 });

}  // namespace
}  // namespace ragd::tools

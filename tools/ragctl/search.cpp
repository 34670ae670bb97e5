// ragctl search "text" [-k 5] [--data DIR] [--json] [--mode hybrid|lexical|dense] [--filter JSON]: the best chunks
// of a corpus with score, source, chunk offsets and a snippet. Opens the data directory read-only,
// so it works beside a running writer.
// ragctl search --queries Q.jsonl --out R.jsonl: one search per line of Q ({"id", "question"}), one
// line per query in R: {"id", "ranked": [{"doc", "source", "title", "score", "chunk_id"}, ...]}
// (the retrieval-quality benchmark's format, bench/retrieval-quality).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <fstream>
#include <optional>

#include <CLI/CLI.hpp>
#include <simdjson.h>

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
  RetrievalMode mode = RetrievalMode::kAuto;
  std::string filter;  // metadata filter, JSON (retrieval/metadata_filter.h)
  std::string queries, out;
  HybridOptions hybrid;
};

// {"id": ..., "question": ...} per line -> (id, question). Errors name the line.
Result<std::vector<std::pair<std::string, std::string>>> read_queries(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("cannot read " + path);
  std::vector<std::pair<std::string, std::string>> out;
  simdjson::dom::parser parser;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    simdjson::dom::element doc;
    std::string_view id, q;
    if (parser.parse(line).get(doc) || doc["id"].get(id) || doc["question"].get(q))
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": expected {\"id\": string, \"question\": string}");
    out.emplace_back(std::string(id), std::string(q));
  }
  return out;
}

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
  if (a.query.empty() && a.queries.empty()) {
    std::fprintf(stderr, "ragctl search: give a query or --queries FILE\n");
    return 2;
  }
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
  o.hybrid = a.hybrid;
  auto c = Corpus::open(data, o, tok);
  if (!c.ok()) {
    std::fprintf(stderr, "ragctl search: %s\n", c.status().to_string().c_str());
    return 1;
  }
  SearchParams sp;
  sp.nprobe = a.nprobe;
  sp.ef_search = a.ef_search;
  sp.mode = a.mode;
  MetadataFilter filter;
  if (!a.filter.empty()) {
    auto f = parse_metadata_filter(a.filter);
    if (!f.ok()) {
      std::fprintf(stderr, "ragctl search: --filter: %s\n", f.status().message().c_str());
      return 2;
    }
    filter = std::move(f).value();
    sp.metadata = &filter;
  }
  if (!a.queries.empty()) {
    auto qs = read_queries(a.queries);
    if (!qs.ok()) {
      std::fprintf(stderr, "ragctl search: %s\n", qs.status().to_string().c_str());
      return 2;
    }
    std::ofstream out(a.out.empty() ? "/dev/stdout" : a.out);
    for (const auto& [id, q] : *qs) {
      auto hits = (*c)->search(q, a.k, retrieval::ReadScope::everything(), sp);
      if (!hits.ok()) {
        std::fprintf(stderr, "ragctl search: query %s: %s\n", id.c_str(), hits.status().to_string().c_str());
        return 1;
      }
      std::string line = "{\"id\":";
      append_json_string(&line, id);
      line += ",\"ranked\":[";
      for (size_t i = 0; i < hits->size(); ++i) {
        const Hit& h = (*hits)[i];
        if (i) line += ',';
        line += "{\"doc\":";
        append_json_string(&line, h.chunk.doc_id);
        line += ",\"source\":";
        append_json_string(&line, h.source);
        line += ",\"title\":";
        append_json_string(&line, h.title);
        char num[96];
        std::snprintf(num, sizeof num, ",\"score\":%.6f,\"chunk_id\":%llu}", static_cast<double>(h.score),
                      static_cast<unsigned long long>(h.chunk.id));
        line += num;
      }
      line += "]}\n";
      out << line;
    }
    return 0;
  }
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
      out += ",\"url\":";
      append_json_string(&out, h.url);
      out += ",\"format\":";
      append_json_string(&out, h.format);
      out += ",\"page\":" + std::to_string(h.page) + ",\"section\":[";
      for (size_t s = 0; s < h.chunk.section.size(); ++s) {
        if (s) out += ',';
        append_json_string(&out, h.chunk.section[s]);
      }
      out += ']';
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
    std::string where;
    for (const auto& s : h.chunk.section) where += (where.empty() ? "" : " > ") + s;
    if (h.page > 0) where += (where.empty() ? "page " : ", page ") + std::to_string(h.page);
    if (!h.url.empty()) where += (where.empty() ? "" : "  ") + ("<" + h.url + ">");
    if (!where.empty()) std::printf("   %s\n", where.c_str());
    std::printf("   %s\n", snippet_of(h.chunk.text, a.snippet).c_str());
  }
  return 0;
}

Registration reg("search", "nearest chunks of an ingested corpus, with scores, sources and snippets",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<SearchArgs>();
                   auto* query = sub.add_option("query", a->query, "query text");
                   auto* queries = sub.add_option("--queries", a->queries,
                                                  "JSONL file of {\"id\", \"question\"}: one search each");
                   query->excludes(queries);
                   sub.add_option("--out", a->out, "with --queries: where the results go (default stdout)");
                   sub.add_option_function<std::string>(
                          "--fusion",
                          [a](const std::string& v) {
                            auto f = parse_enum<HybridFusion>(v, "--fusion");
                            if (!f.ok()) throw CLI::ValidationError(f.status().message());
                            a->hybrid.fusion = *f;
                          },
                          "hybrid: weighted (default) | rrf");
                   sub.add_option("--lexical-share", a->hybrid.lexical_share,
                                  "hybrid, weighted fusion: share of the normalised BM25 score (the cosine's is 1 - it)")
                       ->check(CLI::Range(0.0, 1.0))
                       ->capture_default_str();
                   sub.add_option("--lexical-weight", a->hybrid.lexical_weight,
                                  "hybrid, rrf fusion: weight of the lexical ranking (dense = 1)")
                       ->capture_default_str();
                   sub.add_option("--candidates", a->hybrid.candidates, "hybrid: hits taken from the dense ranking")
                       ->capture_default_str();
                   sub.add_option("--lexical-candidates", a->hybrid.lexical_candidates,
                                  "hybrid: hits taken from the lexical ranking")
                       ->capture_default_str();
                   sub.add_option_function<std::string>(
                       "--mode",
                       [a](const std::string& v) {
                         auto m = parse_enum<RetrievalMode>(v, "--mode");
                         if (!m.ok()) throw CLI::ValidationError(m.status().message());
                         a->mode = *m;
                       },
                       "auto | hybrid | lexical | dense (default auto: the corpus's — lexical with the hashing "
                       "embedder, hybrid with a semantic one)");
                   sub.add_option("--filter", a->filter,
                                  "metadata filter, JSON: {\"lang\":\"en\",\"year\":{\"gte\":2020},\"format\":\"pdf\"} "
                                  "(keys: metadata, format, page, path; operators eq, in, gt, gte, lt, lte)");
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

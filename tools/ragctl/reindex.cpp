// ragctl reindex [--data DIR] [--model DIR]: rebuilds a corpus's indexes from its document store —
// the vector index from the stored embeddings, the lexical (BM25) index from the stored chunks —
// and saves them. For a corpus written by an older release (a lexical index is also built at open
// when there is none, or when it was written by another term scheme), or an index in doubt; then
// checks that the store and both indexes agree. The daemon must not be running on DIR (the
// corpus's writer lock is taken).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "command.h"
#include "env_or.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/corpus.h"

namespace ragd::tools {
namespace {

struct ReindexArgs {
  std::string data;
  std::string model;
};

int run_reindex(const ReindexArgs& a) {
  const std::string data = a.data.empty() ? env_or("RAGD_DATA", "./data") : a.data;
  const std::string model = a.model.empty() ? env_or("RAGD_MODEL", "./data/model") : a.model;
  if (!std::filesystem::is_directory(data)) {
    std::fprintf(stderr, "ragctl reindex: %s is not a data directory\n", data.c_str());
    return 2;
  }
  // The tokenizer matters for a corpus chunked by the model's tokenizer and for the model embedder.
  std::shared_ptr<const engine::Tokenizer> tok;
  if (std::filesystem::exists(model + "/tokenizer.json")) {
    auto t = engine::Tokenizer::from_file(model + "/tokenizer.json");
    if (!t.ok()) {
      std::fprintf(stderr, "ragctl reindex: %s\n", t.status().to_string().c_str());
      return 2;
    }
    tok = std::move(t).value();
  }
  retrieval::CorpusOptions o;
  o.embedder.model_dir = "";
  o.index.omp_threads = 0;  // a batch tool: let FAISS use the cores
  const auto t0 = std::chrono::steady_clock::now();
  auto c = retrieval::Corpus::open(data, o, tok);
  if (!c.ok()) {
    std::fprintf(stderr, "ragctl reindex: %s\n", c.status().to_string().c_str());
    return 1;
  }
  if (Status st = (*c)->reindex(); !st.ok()) {
    std::fprintf(stderr, "ragctl reindex: %s\n", st.to_string().c_str());
    return 1;
  }
  if (Status st = (*c)->check_consistency(); !st.ok()) {
    std::fprintf(stderr, "ragctl reindex: after the rebuild: %s\n", st.to_string().c_str());
    return 1;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const retrieval::CorpusStats st = (*c)->stats();
  std::printf("reindexed %s in %.1f s: %llu documents, %llu chunks, vector index %s and lexical index rebuilt\n", data.c_str(), s,
              static_cast<unsigned long long>(st.documents), static_cast<unsigned long long>(st.chunks),
              st.index_spec.c_str());
  return 0;
}

Registration reg("reindex",
                 "rebuild a corpus's vector and lexical indexes from its document store (after an upgrade, or "
                 "when an index is in doubt) and check that they agree with it",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<ReindexArgs>();
                   sub.add_option("--data", a->data, "data directory (default $RAGD_DATA or ./data)");
                   sub.add_option("--model", a->model,
                                  "model directory whose tokenizer.json the corpus was chunked with (default "
                                  "$RAGD_MODEL or ./data/model)");
                   return [a]() { return run_reindex(*a); };
                 });

}  // namespace
}  // namespace ragd::tools

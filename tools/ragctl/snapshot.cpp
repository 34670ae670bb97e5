// ragctl snapshot --data DIR --out SNAP: a consistent copy of a corpus (RocksDB checkpoint of the
// document store, hard links where possible, plus the published vector index), from which a
// replica on another host starts: a daemon or `ragctl search --data SNAP` answers like one on DIR.
// Works beside a running writer (daemon or `ragctl ingest`). The KV cache's SSD tier
// (DIR/kvcache) is not copied: it is a cache, refilled on use.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "command.h"
#include "ragd/retrieval/corpus.h"

namespace ragd::tools {
namespace {

struct SnapshotArgs {
  std::string data;
  std::string out;
};

int run_snapshot(const SnapshotArgs& a) {
  const char* env_data = std::getenv("RAGD_DATA");
  const std::string data = !a.data.empty() ? a.data : (env_data && *env_data ? env_data : "./data");
  auto info = retrieval::Corpus::snapshot(data, a.out);
  if (!info.ok()) {
    std::fprintf(stderr, "ragctl snapshot: %s\n", info.status().to_string().c_str());
    return info.status().code() == StatusCode::kAlreadyExists || info.status().code() == StatusCode::kInvalidArgument
               ? 2
               : 1;
  }
  std::printf("snapshot of %s in %s: %llu documents, %llu chunks, store seq %llu, index %s%s\n", data.c_str(),
              a.out.c_str(), static_cast<unsigned long long>(info->documents),
              static_cast<unsigned long long>(info->chunks), static_cast<unsigned long long>(info->seq),
              info->index_seq > 0 ? ("of seq " + std::to_string(info->index_seq)).c_str() : "rebuilt at first open",
              info->beside_writer ? " (taken beside a running writer)" : "");
  return 0;
}

Registration reg("snapshot",
                 "consistent copy of a corpus (document store checkpoint + vector index) to start a replica from; "
                 "the KV cache's SSD tier is not copied (a cache, refilled on use)",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<SnapshotArgs>();
                   sub.add_option("--data", a->data, "data directory to copy (default $RAGD_DATA or ./data)");
                   sub.add_option("--out", a->out, "snapshot directory: must not exist, or be empty")->required();
                   return [a]() { return run_snapshot(*a); };
                 });

}  // namespace
}  // namespace ragd::tools

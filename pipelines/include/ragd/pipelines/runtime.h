// The serving runtime the daemon drives: the Executor (runs), the document API (ingest / get /
// delete, same semantics as `ragctl ingest`), both over one model, one data directory.
// Thread-safety: every method of Executor and DocumentApi is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/kvstore/kv_store.h"
#include "ragd/seqparallel/communicator.h"
#include "ragd/pipelines/blend_fidelity.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/scheduler.h"

namespace ragd::pipelines {

// The daemon's [runtime] table. Fields that configure a module take their defaults from that
// module's Options (engine::ModelOptions, kvstore::Options, SchedulerOptions), so there is one set
// of defaults; model_options() / kvstore_options() / scheduler_options() compose them back.
struct RuntimeOptions {
  std::string model_dir;             // HF model directory (config.json, *.safetensors, tokenizer.json)
  std::string data_dir;              // document store, vector index, SSD KV tier live here
  std::string pipelines_dir;         // *.toml pipeline specs; "" = only the built-in "default"
  std::string device = "cpu";        // "cpu" or "cuda:N"
  std::string weights = "auto";      // weights in memory: auto (checkpoint dtype) | f32 | bf16 | f16 | q8
  std::string kv_dtype = "f32";      // KV pool storage: f32 | bf16 | int8 (kernels/kv_dtype.h)
  std::string scheduler = "fcfs";    // fcfs | sjf | mlfq | fair (SchedulerOptions::policy)
  int max_batch_tokens = SchedulerOptions{}.max_batch_tokens;  // token budget per scheduler step (chunked prefill); 512
  int max_running = SchedulerOptions{}.max_running;            // concurrent sequences in the running batch; 16
  int max_queue = 256;               // waiting requests before submit() returns ResourceExhausted
  size_t kv_pool_bytes = engine::ModelOptions{}.kv_pool_bytes;  // in-engine KV pool = the HBM tier; 512 MiB
  size_t dram_cache_bytes = kvstore::Options{}.dram_bytes;      // DRAM tier; 1 GiB
  size_t ssd_cache_bytes = kvstore::Options{}.ssd_bytes;        // SSD tier (RocksDB in data_dir/kvcache); 8 GiB; 0 = off
  std::string eviction = kvstore::Options{}.eviction;           // pgdsf | lru | lfu | gdsf, over every tier
  std::string preemption = "swap";   // swap | recompute
  // Running slots one tenant may hold while other tenants have requests, in percent of
  // max_running (SchedulerOptions::tenant_share; the fair scheduler uses an equal share); 1..100,
  // default 75.
  int tenant_share_percent = 75;
  size_t swap_bytes = 512ull << 20;  // host memory for KV of swapped-out (preempted) requests; default 512 MiB
  int kv_block_size = engine::ModelOptions{}.kv_block_size;     // tokens per in-engine KV block; 16
  bool hbm_cache = true;             // keep reusable KV in the engine pool (off: reuse only from DRAM/SSD)
  int retrieval_threads = 4;
  // Retrieval threads one tenant's work (searches, reranking) may hold at once; 0 = half of
  // retrieval_threads (at least 1), so that one tenant's backlog never holds them all.
  int retrieval_threads_per_tenant = 0;
  int num_threads = 0;               // engine compute threads; 0 = all cores
  // Sequence parallelism: prompts of at least sp_threshold_tokens are split across sp_workers
  // in-process workers (ring-attention prefill, sharded decode; each worker loads the model and
  // has its own kv_pool_bytes). 1 = off. A long request occupies every worker while it runs.
  int sp_workers = 1;
  int sp_threshold_tokens = 16384;
  // Ring prefill in steps of about this many tokens per worker (bounds activations; earlier steps'
  // KV travels again); 0 = the whole shard in one step.
  int sp_chunk_tokens = 0;
  std::string sp_partition = "zigzag";  // zigzag | contiguous | striped
  std::string sp_transport = "host";    // host (threads / MPI) | nccl (one GPU per worker)
  std::string embedder = "hashing";  // hashing | model
  int embedder_dim = 384;            // hashing embedder dimension (new corpora only); default 384
  std::string index_spec = "Flat";   // FAISS factory string for new indexes
  int chunk_tokens = 256;
  BlendCheckOptions blend_check;     // the approximate reuse modes' self-check per model
  // Added to every corpus search (ms): models a remote vector database in benchmarks. 0 = none.
  double search_delay_ms = 0;
  // Tests: called on the scheduler thread with the run id and the boundary of every speculation
  // of an iterative run; true makes its verification count it as wrong (a forced rollback).
  std::function<bool(const std::string&, int)> force_misspeculation;
  // A step's sampled rows are drawn on all cores once rows × vocabulary reach this many values
  // (below, the thread start-up costs more than it saves). Tests set 0 to force it.
  size_t parallel_sample_min_values = size_t{1} << 18;
  // Tests: called on the scheduler thread with the run id just before a run's prompt KV is
  // published (e.g. to block publication and check that the first token is already out).
  std::function<void(const std::string&)> before_publish;

  Result<engine::ModelOptions> model_options() const;
  // InvalidArgument naming a bad policy / preemption name or a non-positive size.
  Result<SchedulerOptions> scheduler_options() const;
  // The KV tiers: the pool's share (all of it unless hbm_cache is off), DRAM, and SSD under
  // data_dir/kvcache when there is a data dir; write-behind to SSD on. The caller sets `pool`.
  kvstore::Options kvstore_options() const;
};

struct DocumentInput {
  std::string id;      // required, stable across re-ingests
  std::string title;
  std::string text;
  std::string source;  // path or URL it came from (informational)
  std::string tenant;  // owner; "" = shared (read-only to tenants). Each owner has its own ids.
};

struct IngestSummary {
  int ingested = 0, unchanged = 0, replaced = 0, skipped = 0;
  int chunks = 0;
  std::vector<std::string> skip_reasons;  // "id: reason"
};

struct DocumentInfo {
  std::string id, title, source, content_hash;
  std::string tenant;  // owner; "" = shared
  std::vector<uint64_t> chunk_ids;
  std::string text;  // concatenated chunk texts
};

// One entry of a document listing (no text).
struct DocumentSummary {
  std::string id, title, source;
  std::string tenant;  // owner; "" = shared
  uint64_t bytes = 0;  // text bytes
  size_t chunks = 0;
};

struct DocumentPage {
  std::vector<DocumentSummary> documents;
  bool has_more = false;  // more entries follow the last one returned
};

class DocumentApi {
 public:
  virtual ~DocumentApi() = default;
  // Acknowledged (OK) only once durable, ownership included. PermissionDenied (nothing written)
  // when a tenant's document names a shared document's id.
  virtual Result<IngestSummary> ingest(std::vector<DocumentInput> docs) = 0;
  // `tenant`'s own document `id`, else the shared one ("" = shared only); NotFound otherwise.
  virtual Result<DocumentInfo> get(const std::string& id, const std::string& tenant) const = 0;
  // Removes `tenant`'s own document ("" = a shared one). NotFound when it has none of that id,
  // PermissionDenied when the id names only a shared document.
  virtual Status remove(const std::string& id, const std::string& tenant) = 0;
  // The documents `tenant` reads: its own and the shared ones ("" = shared only), ordered by id
  // (its own before a shared one of the same id), those whose id sorts after `after`, at most
  // `limit` of them except that two entries of one id are never split across pages. Scans the
  // store's document records (no chunk text): fine for consoles, not a search.
  virtual Result<DocumentPage> list(const std::string& tenant, const std::string& after, size_t limit) const = 0;
  // Embeddings with the corpus embedder (for /v1/embeddings).
  virtual Result<std::vector<std::vector<float>>> embed(const std::vector<std::string>& texts) const = 0;
};

struct Runtime {
  std::unique_ptr<Executor> executor;
  std::unique_ptr<DocumentApi> documents;
  std::function<void()> stop;  // drains in-flight work, flushes cache metadata; idempotent
};

// Loads the model, opens the data directory, starts the scheduler and pools.
// sp_comm: rank 0 of a communicator whose other ranks run seqparallel::serve_after_barrier() (an
// MPI job, `mpirun -np N ragd`): long prompts go to those ranks instead of in-process workers
// (sp_workers must then be 1).
Result<Runtime> open_runtime(const RuntimeOptions& opts, std::unique_ptr<seqparallel::Communicator> sp_comm = nullptr);

}  // namespace ragd::pipelines

// RuntimeOptions: the daemon's [runtime] table, typed. Every choice is an enum, parsed once where
// the configuration is read (daemon/src/config.cpp: TOML, --set, flags; ragctl and benches from
// their flags) with the enum's one name table (enum_names.h); the runtime never parses a string.
// Module settings live in the modules' own Options, nested (model, scheduler, kv). validate() is
// the one check (it runs each nested module's validate()), run by the daemon's config validation
// and again by open_runtime, so `ragd --print-config` refuses exactly what the runtime would
// refuse, with the same message.
//
// The code of this header lives in ragd_pipelines_options, a small library the daemon's HTTP
// layer links without linking the pipelines library.
// Thread-safety: value type; the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/kvstore/kv_store.h"
#include "ragd/pipelines/blend_fidelity.h"
#include "ragd/pipelines/draft_method.h"
#include "ragd/pipelines/scheduler.h"
#include "ragd/retrieval/retrieval_mode.h"
#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/perf_model.h"
#include "ragd/seqparallel/sp_group.h"

namespace ragd::pipelines {

// How the corpus embeds text for search: the hashing embedder (no model; the corpus keeps the one
// it was built with) or the serving model's mean hidden state.
enum class EmbedderKind : uint8_t { kAuto, kHashing, kTermvec, kModel };
inline constexpr auto kEmbedderKindNames = make_enum_names<EmbedderKind>(
    "embedder", {{EmbedderKind::kAuto, "auto"},
                 {EmbedderKind::kHashing, "hashing"},
                 {EmbedderKind::kTermvec, "termvec"},
                 {EmbedderKind::kModel, "model"}});
constexpr const auto& ragd_enum_names(EmbedderKind) { return kEmbedderKindNames; }
static_assert(enum_names_valid(kEmbedderKindNames));

// Hooks that tests and benchmarks set in code. Not configuration: no config key reaches them, and
// production leaves them at their defaults.
struct RuntimeTestHooks {
  // Called on the scheduler thread with the run id and the boundary of every speculation of an
  // iterative run; true makes its verification count it as wrong (a forced rollback).
  std::function<bool(const std::string&, int)> force_misspeculation;
  // Called on the scheduler thread with the run id just before a run's prompt KV is published
  // (e.g. to block publication and check that the first token is already out).
  std::function<void(const std::string&)> before_publish;
  // A step's sampled rows are drawn on all cores once rows × vocabulary reach this many values
  // (below, the thread start-up costs more than it saves); 0 forces it.
  size_t parallel_sample_min_values = size_t{1} << 18;
  // Added to every corpus search (ms): models a remote vector database in benchmarks. 0 = none.
  double search_delay_ms = 0;
  // CacheBlend / EPIC the earlier way, for comparison: first-seen documents' chunk KV computed
  // and the repair run as steps of their own at admission, the prompt's rest in the next step
  // (ReusePlanner::set_defer_repair(false)). Default: the repair rides in the first prefill step.
  bool blend_repair_at_admission = false;
  // BENCHMARKS ONLY (bench_srtf): the workload's hidden stop rule. Called once per run with its id
  // when the run is prepared; n > 0 ends the run after n generated tokens (as an end-of-sequence
  // token would; finish_reason "length"), and neither the scheduler nor the length features are
  // told: they see the request's max_tokens. Unset = none.
  std::function<int(const std::string&)> stop_after_tokens;
  // (srtf is told this value as the true length with scheduler.oracle_lengths, the oracle bound.)
  // BENCHMARKS AND TESTS ONLY: replaces the n-gram lookup as the source of speculative drafts.
  // Called on the scheduler thread with the run id, its tokens (prompt and output), the tokens it
  // generated so far and the draft length its drafter asks for; returns at most that many tokens
  // (forced acceptance patterns: a benchmark drafts a known continuation, corrupted at chosen
  // places). The adaptive length, the cool-down and the step budget apply as to n-gram drafts.
  std::function<std::vector<int32_t>(const std::string&, std::span<const int32_t>, int, int)> draft_source;
  // BENCHMARKS ONLY: every proposed draft token is verified (the step budget, draft_budget.h, off;
  // method draft drafts with its model at every step: its gate off too).
  bool draft_budget_off = false;
  // BENCHMARKS ONLY: a run of method draft whose draft-model gate says no drafts nothing that step
  // (no n-gram drafts in its place): the gate's own effect.
  bool draft_model_alone = false;
};

// Speculative decoding (n-gram drafts from each run's own tokens). Which draft tokens ride in a
// step is the measured step-cost model's choice (draft_budget.h: a draft row rides while its
// expected tokens are worth its time); max_decodes is a hard cap on top.
struct SpeculativeOptions {
  // Draft tokens per decode step at most, 0..16; 0 = off (default); a request's speculative_k
  // overrides it. Config key runtime.speculative_k.
  int k = 0;
  // No drafts while more runs than this decode at once; 1..256, default 256 (no cap). Config key
  // runtime.speculative_max_decodes.
  int max_decodes = 256;
  // N-grams of earlier answers kept for drafts where the prompt has nothing to copy (per scope, all
  // scopes together; output_ngrams.h), 0..16,777,216; 0 = off. Config key
  // runtime.speculative_answer_ngrams.
  int answer_ngrams = 65536;
  // Where drafts come from (draft_method.h): ngram (default) or draft (a draft model). A pipeline's
  // [generation] speculative.method and a request's speculative_method override it. Config key
  // runtime.speculative_method.
  DraftMethod method = DraftMethod::kNgram;
  // The draft model of method draft (a model directory with the serving model's tokenizer), loaded
  // at start; "" = none (then method draft needs a pipeline's or request's draft_model among the
  // loaded ones). Config key runtime.speculative_draft_model.
  std::string draft_model;
};

// The daemon's [runtime] table. Each module's settings live in that module's own Options, nested
// here (as RocksDB's Options nest its parts), so each setting has one home and one default:
//   model      engine::ModelOptions   runtime.device, weights, kv_dtype, kv_pool_bytes,
//                                     num_threads (kv_block_size: no config key)
//   scheduler  SchedulerOptions       runtime.scheduler (policy), preemption, max_batch_tokens,
//                                     max_running, tenant_share_percent
//   kv         kvstore::Options       runtime.dram_cache_bytes (dram_bytes), ssd_cache_bytes
//                                     (ssd_bytes), eviction; [kvstore.remote] (remote);
//                                     [events] kv_* (events)
// The fields the runtime derives when it opens (kv.hbm_bytes from hbm_cache, kv.ssd_dir from
// data_dir, kv.tenant_isolation, kv.pool) are set by kvstore_options(); the rest pass as they are.
struct RuntimeOptions {
  std::string model_dir;             // HF model directory (config.json, *.safetensors, tokenizer.json)
  std::string data_dir;              // document store, vector index, SSD KV tier live here
  // Replica: the primary's data_dir, whose corpus this runtime serves read-only (a RocksDB
  // secondary; data_dir then holds only its scratch and the SSD KV tier). "" = off (default).
  std::string data_replica_of;
  int replica_catch_up_ms = 1000;    // replica: how often it reads the primary's new writes, ms; 1000
  std::string pipelines_dir;         // *.toml pipeline specs; "" = only the built-in "default"
  // The serving model: device, weights, KV pool (the HBM tier: kv_pool_bytes, kv_block_size,
  // kv_dtype), compute threads (engine::ModelOptions::validate).
  engine::ModelOptions model;
  // The scheduler: policy, preemption, step budget, running batch, tenant share
  // (SchedulerOptions::validate). Its length_model is loaded from length_model below.
  SchedulerOptions scheduler;
  // The KV tiers below the pool: DRAM, SSD (RocksDB in data_dir/kvcache; ssd_bytes 0 = off),
  // eviction over every tier, the remote tier (remote.url "" = off) and KV events (events.endpoint
  // "" = off; blocks are the pool's kv_block_size) (kvstore::Options::validate).
  kvstore::Options kv;
  // srtf: a length head trained by `ragctl length-train` (length_model.h); "" (default) = srtf
  // orders by sjf's estimate (per-pipeline mean + regression on prompt length) less the generated
  // tokens. Read when the runtime opens; only with scheduler.policy = srtf.
  std::string length_model;
  // The length log (length_log.h): one JSON line per finished run (features + true output length),
  // appended to this file, what `ragctl length-train` fits a head on. "" (default) = off. The lines
  // hold the users' questions.
  std::string length_log;
  int max_queue = 256;               // waiting requests before submit() returns ResourceExhausted
  SpeculativeOptions speculative;    // speculative decoding; off by default
  size_t swap_bytes = 512ull << 20;  // host memory for KV of swapped-out (preempted) requests; default 512 MiB
  bool hbm_cache = true;             // keep reusable KV in the engine pool (off: reuse only from DRAM/SSD)
  int retrieval_threads = 4;
  // Retrieval threads one tenant's work (searches, reranking) may hold at once; 0 = half of
  // retrieval_threads (at least 1), so that one tenant's backlog never holds them all.
  int retrieval_threads_per_tenant = 0;
  // Sequence parallelism: prompts of at least sp_threshold_tokens are split across sp_workers
  // in-process workers (ring-attention prefill, sharded decode; each worker loads the model and
  // has its own model.kv_pool_bytes). 1 = off. A long request occupies every worker while it runs.
  int sp_workers = 1;
  int sp_threshold_tokens = 16384;
  // Ring prefill in steps of about this many tokens per worker (bounds activations; earlier steps'
  // KV travels again); 0 = the whole shard in one step.
  int sp_chunk_tokens = 0;
  seqparallel::PartitionKind sp_partition = seqparallel::PartitionKind::kZigzag;  // zigzag | contiguous | striped
  seqparallel::SpTransport sp_transport = seqparallel::SpTransport::kHost;  // host (threads / MPI) | nccl (a GPU per worker)
  // Elastic degree (sequence_parallel_route.h): kernel rates of this machine (seqparallel/perf_model.h;
  // read from runtime.sp_rates_file, `ragctl plan --json`'s output or its "rates" object); each long
  // run then goes to the number of workers predicted to finish it soonest. Unset: every worker.
  std::optional<seqparallel::KernelRates> sp_rates;
  std::string sp_rates_file;
  // KV spill (seqparallel/kv_spill.h): a prompt whose KV does not fit the pool (prompt + max_tokens
  // needs more blocks than kv_pool_bytes holds) runs as one long sequence whose older KV moves out
  // of the pool, first into kv_spill_dram_bytes of host memory, then (kv_spill_ssd) into a file in
  // data_dir/kv-spill (the system's temporary folder without a data dir), and is attended where it
  // lives. Both 0 / false: such a prompt is refused (400 naming the pool's size). With a
  // sequence-parallel group every worker spills its own shard.
  size_t kv_spill_dram_bytes = size_t{1} << 30;
  bool kv_spill_ssd = true;
  // Prefill step, in tokens per worker, of a sequence that spills when sp_chunk_tokens is 0.
  int kv_spill_chunk_tokens = 8192;
  // The spill every worker uses (the folder is made when the runtime opens); disabled on a device
  // backend (the spill reads the host pool's bytes).
  seqparallel::SpillOptions spill_options() const;
  // auto (default) | hashing | termvec | model. auto and hashing: a corpus keeps the embedder it
  // was built with; a new data directory gets the shipped term vectors (models/ragd-termvec or
  // $RAGD_TERMVEC_DIR; hashed words when neither is there) under auto, hashed words under hashing —
  // as `ragctl ingest` does for a new corpus.
  EmbedderKind embedder = EmbedderKind::kAuto;
  int embedder_dim = 384;            // hashing embedder dimension (new corpora only); default 384
  // "model" embedder: its checkpoint; "" (default) = the generator's model_dir. A BERT-family
  // directory (config.json BertModel, XLMRobertaModel, ...) is an encoder embedder pooled as its
  // sentence-transformers files say (retrieval/embedder.h). "termvec": the term-vector directory;
  // "" (default) = the shipped models/ragd-termvec (or $RAGD_TERMVEC_DIR).
  std::string embedder_model_dir;
  std::string embedder_query_prefix;     // encoder embedders: prepended to search queries; default none
  std::string embedder_document_prefix;  // encoder embedders: prepended to ingested passages; default none
  // Cross-encoder (BertForSequenceClassification) serving /v1/rerank; "" (default) = none.
  std::string rerank_model_dir;
  int chunk_tokens = 256;            // tokens per document chunk at ingest; default 256
  // How searches find passages: auto (default: lexical with the hashing embedder, hybrid with a
  // semantic one: the better ranking on real documents, docs/benchmarks.md) | hybrid | lexical |
  // dense (the vector index alone, as before the lexical index) (retrieval/retrieval_mode.h).
  retrieval::RetrievalMode retrieval_mode = retrieval::RetrievalMode::kAuto;
  BlendCheckOptions blend_check;     // the approximate reuse modes' self-check per model
  RuntimeTestHooks test_hooks;       // tests and benchmarks only (see RuntimeTestHooks)

  // The one check: each nested module's validate() (model, scheduler, kv: its remote tier
  // included), then the runtime's own ranges and cross-field rules. InvalidArgument naming the
  // config key: "runtime.sp_workers: must be > 0, got 0". An enum field holding a value outside
  // its table (a cast) is named too.
  Status validate() const;
  // The KV store's Options as the runtime opens it: `kv` with the fields derived from the rest
  // (hbm_bytes: all of model.kv_pool_bytes unless hbm_cache is off; ssd_dir: data_dir/kvcache when
  // there is a data dir and ssd_bytes > 0; tenant_isolation on). The caller sets `pool`.
  kvstore::Options kvstore_options() const;
};

}  // namespace ragd::pipelines

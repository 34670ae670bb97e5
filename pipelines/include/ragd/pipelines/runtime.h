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
#include "ragd/pipelines/executor.h"
#include "ragd/retrieval/document.h"
#include "ragd/pipelines/runtime_options.h"  // RuntimeOptions: the daemon's [runtime] table

namespace ragd::pipelines {

struct DocumentInput {
  std::string id;      // required, stable across re-ingests
  std::string title;
  std::string text;
  std::string source;  // path or URL it came from (informational)
  std::string tenant;  // owner; "" = shared (read-only to tenants). Each owner has its own ids.
  std::string url;     // cited with its passages ("" = none)
  std::string metadata_json;  // a JSON object of string / number / bool / list values; "" = none
  // How `text` is read: "text" (as is; "" too), "markdown" (sections by heading) or "html" (the
  // page's main content, sections by heading; the <title> when `title` is empty), by the readers
  // `ragctl ingest` uses (retrieval/reader.h); "pdf" and "jsonl" label text already extracted.
  // With `sections` given the text is already extracted and the format is only its label.
  std::string format;
  uint32_t page = 0;  // a PDF page's 1-based page; 0 = none
  std::vector<retrieval::Section> sections;  // headings, already found (ragctl ingest --url)
};

struct IngestSummary {
  int ingested = 0, unchanged = 0, replaced = 0, skipped = 0;
  int chunks = 0;
  std::vector<std::string> skip_reasons;  // "id: reason"
};

struct DocumentInfo {
  std::string id, title, source, content_hash;
  std::string url, format;
  uint32_t page = 0;
  std::vector<std::pair<std::string, std::string>> metadata;  // key, minified JSON value
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

// An embedder or a cross-encoder as the daemon lists it (GET /v1/models).
struct EncoderInfo {
  std::string name;      // the checkpoint directory's name; "hashing" / "termvec" for those embedders; "" = none
  std::string identity;  // retrieval's identity string (kind, fingerprint, dimension, pooling)
  int dim = 0;           // embedders: the dimension of a vector
};

class DocumentApi {
 public:
  virtual ~DocumentApi() = default;
  // Acknowledged (OK) only once durable, ownership included. PermissionDenied (nothing written)
  // when a tenant's document names a shared document's id; InvalidArgument (nothing written)
  // naming the document when its metadata is not an object of the allowed values.
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
  // Embeddings of token-id inputs. The ids are the served model's tokenizer's (the ids the corpus
  // chunks with and /v1/completions takes): decoded, then embedded as text. InvalidArgument naming
  // an id outside the vocabulary; FailedPrecondition when the embedder has a tokenizer of its own.
  virtual Result<std::vector<std::vector<float>>> embed_ids(const std::vector<std::vector<int32_t>>& inputs) const {
    (void)inputs;
    return Status::FailedPrecondition("token-id inputs need a corpus");
  }
  // What embeds and what reranks; name "" = none.
  virtual EncoderInfo embedder_info() const { return {}; }
  virtual EncoderInfo reranker_info() const { return {}; }
  // Relevance scores of `documents` for `query` with the cross-encoder of runtime.rerank_model_dir
  // (for /v1/rerank), one per document in input order. FailedPrecondition when none is configured.
  virtual Result<std::vector<float>> rerank(const std::string& query, const std::vector<std::string>& documents) const {
    (void)query, (void)documents;
    return Status::FailedPrecondition("no reranker: set runtime.rerank_model_dir to a cross-encoder checkpoint");
  }
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

// The runtime of a rank > 0 of such a job: loads the model `opts` names and serves rank 0's
// sequence-parallel commands (seqparallel::serve_after_barrier) until rank 0 shuts the group down;
// blocks until then, on the calling thread. A model that does not load is logged and aborts the
// group (comm.abort: rank 0 waits at the barrier for this rank), and is returned; so is a failure
// while serving.
[[nodiscard]] Status serve_sp_rank(const RuntimeOptions& opts, seqparallel::Communicator& comm);

}  // namespace ragd::pipelines

// open_runtime: model + tokenizer + corpus + executor (which opens the KV tiers over the model's
// pool), and the DocumentApi over the corpus.
#include "ragd/pipelines/runtime.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include <simdjson.h>

#include "ragd/common/echo.h"
#include "ragd/common/log.h"
#include "ragd/common/text_file.h"
#include "cross_encoder_stage.h"
#include "executor_impl.h"
#include "semantic_cache.h"
#if RAGD_HAVE_RETRIEVAL
#include "ragd/retrieval/corpus.h"
#include "ragd/retrieval/reranker.h"
#endif

namespace ragd::pipelines {

namespace {

// Sorts visible entries by (id, own before shared) and cuts a page of about `limit`.
[[maybe_unused]] DocumentPage page_of(std::vector<DocumentSummary> all, size_t limit) {
  std::sort(all.begin(), all.end(), [](const DocumentSummary& a, const DocumentSummary& b) {
    if (a.id != b.id) return a.id < b.id;
    return !a.tenant.empty() && b.tenant.empty();
  });
  DocumentPage page;
  size_t n = std::min(limit, all.size());
  while (n > 0 && n < all.size() && all[n].id == all[n - 1].id) ++n;  // never split one id
  page.has_more = n < all.size();
  all.resize(n);
  page.documents = std::move(all);
  return page;
}

#if RAGD_HAVE_RETRIEVAL
// A checkpoint directory's name ("/models/bge-small/" -> "bge-small").
std::string dir_name(const std::string& dir) {
  std::filesystem::path p(dir);
  std::string n = p.filename().string();
  return n.empty() ? p.parent_path().filename().string() : n;
}

class CorpusDocuments final : public DocumentApi {
 public:
  CorpusDocuments(std::shared_ptr<retrieval::Corpus> c, std::shared_ptr<SemanticCache> semantic)
      : corpus_(std::move(c)), semantic_(std::move(semantic)) {}

  Result<IngestSummary> ingest(std::vector<DocumentInput> docs) override {
    std::vector<retrieval::Document> in;
    in.reserve(docs.size());
    for (size_t i = 0; i < docs.size(); ++i) {
      DocumentInput& d = docs[i];
      retrieval::Document r;
      if (!d.metadata_json.empty()) {
        if (std::string why = retrieval::parse_metadata_json(d.metadata_json, &r.metadata); !why.empty())
          return Status::InvalidArgument("document " + std::to_string(i) + " ('" + clip_input(d.id) + "'): " + why);
      }
      const std::string who = "document " + std::to_string(i) + " ('" + clip_input(d.id) + "'): ";
      r.id = std::move(d.id);
      r.title = std::move(d.title);
      r.source = std::move(d.source);
      r.tenant = std::move(d.tenant);
      r.url = std::move(d.url);
      r.page = d.page;
      if (d.format.empty() || d.format == "text" || d.format == "pdf" || d.format == "jsonl" || d.format == "man" ||
          d.format == "docx" || d.format == "odt" || d.format == "epub" || !d.sections.empty()) {
        // As is (already extracted when sections are given); sections out of order or range are
        // refused here rather than ignored by the chunker.
        if (!retrieval::sections_fit(d.sections, d.text.size()))
          return Status::InvalidArgument(who + "sections must be in order, not overlap, and lie within the text");
        r.text = std::move(d.text);
        r.sections = std::move(d.sections);
        r.format = d.format.empty() ? "text" : d.format;
      } else if (d.format == "markdown" || d.format == "html") {
        const bool html = d.format == "html";
        retrieval::ReadResult rr = retrieval::read_input_bytes(html ? "document.html" : "document.md", d.text);
        if (rr.documents.empty())
          return Status::InvalidArgument(who + (rr.skipped.empty() ? std::string("no text") : rr.skipped.front().reason));
        retrieval::Document& read = rr.documents.front();
        if (r.title.empty() && read.title != (html ? "document.html" : "document.md")) r.title = std::move(read.title);
        r.text = std::move(read.text);
        r.sections = std::move(read.sections);
        r.format = d.format;
      } else {
        return Status::InvalidArgument(who + "format must be text, markdown, html, pdf, jsonl, man, docx, odt or epub, not '" +
                                       clip_input(d.format) + "'");
      }
      in.push_back(std::move(r));
    }
    RAGD_ASSIGN_OR_RETURN(retrieval::IngestSummary s, replica_refusal(corpus_->ingest(in)));
    if (semantic_ && s.replaced > 0) {
      // Answers drawn from a replaced document go (the summary counts them; the batch's ids are
      // a superset). Their context keys already changed with the chunks.
      std::vector<std::string> ids;
      for (const auto& d : in) ids.push_back(d.id);
      semantic_->invalidate(ids);
    }
    IngestSummary o;
    o.ingested = static_cast<int>(s.ingested);
    o.unchanged = static_cast<int>(s.unchanged);
    o.replaced = static_cast<int>(s.replaced);
    o.skipped = static_cast<int>(s.rejected);
    o.chunks = static_cast<int>(s.chunks_added);
    for (const auto& p : s.problems) o.skip_reasons.push_back(p.path + ": " + p.reason);
    return o;
  }

  Result<DocumentInfo> get(const std::string& id, const std::string& tenant) const override {
    RAGD_ASSIGN_OR_RETURN(auto info, corpus_->get_document(id, tenant));
    if (!info) return Status::NotFound("document '" + id + "' not found");
    DocumentInfo o;
    o.id = info->id;
    o.title = info->title;
    o.source = info->source;
    o.content_hash = info->content_hash;
    o.url = info->url;
    o.format = info->format;
    o.page = info->page;
    o.metadata = info->metadata;
    o.tenant = info->tenant;
    o.chunk_ids = info->chunk_ids;
    RAGD_ASSIGN_OR_RETURN(auto chunks, corpus_->get_chunks(info->chunk_ids));
    for (const auto& c : chunks)
      if (c) o.text += c->text;
    return o;
  }

  Status remove(const std::string& id, const std::string& tenant) override {
    RAGD_ASSIGN_OR_RETURN(bool existed, replica_refusal(corpus_->remove_document(id, tenant)));
    if (!existed) return Status::NotFound("document '" + id + "' not found");
    if (semantic_) semantic_->invalidate(std::span<const std::string>(&id, 1));  // answers drawn from it go
    return Status::OK();
  }

  Result<DocumentPage> list(const std::string& tenant, const std::string& after, size_t limit) const override {
    std::vector<DocumentSummary> all;
    RAGD_RETURN_IF_ERROR(corpus_->for_each_document([&](const retrieval::DocumentInfo& d) {
      if ((d.tenant == tenant || d.tenant.empty()) && d.id > after)
        all.push_back({d.id, d.title, d.source, d.tenant, d.bytes, d.chunk_ids.size()});
      return true;
    }));
    return page_of(std::move(all), limit);
  }

  Result<std::vector<std::vector<float>>> embed(const std::vector<std::string>& texts) const override {
    std::vector<std::string_view> views(texts.begin(), texts.end());
    std::vector<float> flat;
    RAGD_RETURN_IF_ERROR(corpus_->embedder().embed(views, &flat));
    const size_t dim = static_cast<size_t>(corpus_->embedder().dim());
    std::vector<std::vector<float>> out(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) out[i].assign(flat.begin() + i * dim, flat.begin() + (i + 1) * dim);
    return out;
  }

  Result<std::vector<std::vector<float>>> embed_ids(const std::vector<std::vector<int32_t>>& inputs) const override {
    if (!ids_tokenizer_)
      return Status::FailedPrecondition("the embedder '" + embedder_.name +
                                        "' has a tokenizer of its own: send text (token ids are the served model's)");
    std::vector<std::string> texts;
    texts.reserve(inputs.size());
    const int32_t vocab = ids_tokenizer_->vocab_size();
    for (size_t i = 0; i < inputs.size(); ++i) {
      for (size_t j = 0; j < inputs[i].size(); ++j)
        if (inputs[i][j] < 0 || inputs[i][j] >= vocab)
          return Status::InvalidArgument("input[" + std::to_string(i) + "][" + std::to_string(j) + "]: token id " +
                                         std::to_string(inputs[i][j]) + " is outside the vocabulary [0, " +
                                         std::to_string(vocab) + ")");
      texts.push_back(ids_tokenizer_->decode(inputs[i], /*skip_special=*/true));
    }
    return embed(texts);
  }
  EncoderInfo embedder_info() const override { return embedder_; }
  EncoderInfo reranker_info() const override { return reranker_info_; }
  // What the daemon lists; `ids_tokenizer` decodes token-id inputs (null: the embedder has a
  // tokenizer of its own, and token ids are refused).
  void set_served(EncoderInfo embedder, std::shared_ptr<const engine::Tokenizer> ids_tokenizer) {
    embedder_ = std::move(embedder);
    ids_tokenizer_ = std::move(ids_tokenizer);
  }

  Result<std::vector<float>> rerank(const std::string& query, const std::vector<std::string>& documents) const override {
    if (!reranker_) return DocumentApi::rerank(query, documents);
    std::vector<std::string_view> views(documents.begin(), documents.end());
    std::vector<float> scores;
    RAGD_RETURN_IF_ERROR(reranker_->score(query, views, &scores));
    return scores;
  }
  void set_reranker(std::unique_ptr<retrieval::CrossEncoderReranker> r, std::string name) {
    reranker_info_ = {std::move(name), r->identity(), 0};
    reranker_ = std::move(r);
  }

 private:
  // A replica's refusal to write is the caller's to read (403), not a server state to hide. The
  // corpus's message names the primary's directory: the log keeps it, the caller gets the fixed
  // message (client-facing messages never carry server paths).
  template <typename T>
  Result<T> replica_refusal(Result<T> r) const {
    if (!r.ok() && corpus_->is_replica() && r.status().code() == StatusCode::kFailedPrecondition) {
      log::pipelines()->info("document write refused: {}", r.status().to_string());
      return Status::PermissionDenied(retrieval::kReplicaReadOnly);
    }
    return r;
  }
  std::shared_ptr<retrieval::Corpus> corpus_;
  std::shared_ptr<SemanticCache> semantic_;  // answers of [semantic_cache] pipelines (invalidated here)
  std::unique_ptr<retrieval::CrossEncoderReranker> reranker_;  // immutable after open; score() is thread-safe
  EncoderInfo embedder_, reranker_info_;                         // immutable after open
  std::shared_ptr<const engine::Tokenizer> ids_tokenizer_;        // immutable after open
};
#endif

class NoDocuments final : public DocumentApi {
 public:
  Result<IngestSummary> ingest(std::vector<DocumentInput>) override { return unavailable(); }
  Result<DocumentInfo> get(const std::string&, const std::string&) const override { return unavailable(); }
  Status remove(const std::string&, const std::string&) override { return unavailable(); }
  Result<DocumentPage> list(const std::string&, const std::string&, size_t) const override { return unavailable(); }
  Result<std::vector<std::vector<float>>> embed(const std::vector<std::string>&) const override { return unavailable(); }

 private:
  static Status unavailable() { return Status::Unavailable("no document store: the runtime was opened without data_dir"); }
};

// open_runtime's work, on the calling thread.
// Kernel rates for the elastic degree: a file holding the rates object (`ragctl plan --rates`'s
// form) or `ragctl plan --json`'s output (its "rates" member).
Result<seqparallel::KernelRates> load_sp_rates(const std::string& path) {
  RAGD_ASSIGN_OR_RETURN(std::string text, read_text_file(path, "runtime.sp_rates_file"));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return Status::InvalidArgument("runtime.sp_rates_file " + path + ": not JSON");
  simdjson::dom::element rates;
  if (!doc.at_key("rates").get(rates)) text = simdjson::minify(rates);
  auto r = seqparallel::parse_kernel_rates(text);
  if (!r.ok()) return r.status().with_context("runtime.sp_rates_file " + path);
  return r;
}

// The spill every worker of this process uses, its folder made.
Result<seqparallel::SpillOptions> spill_options_with_folder(const RuntimeOptions& opts) {
  seqparallel::SpillOptions spill = opts.spill_options();
  if (!spill.dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(spill.dir, ec);
    if (ec) return Status::IOError("KV spill folder " + spill.dir + ": " + ec.message());
  }
  return spill;
}

Result<Runtime> open_runtime_here(const RuntimeOptions& opts, std::unique_ptr<seqparallel::Communicator> sp_comm) {
  if (opts.model_dir.empty()) return Status::InvalidArgument("runtime: model_dir is required");
  RAGD_ASSIGN_OR_RETURN(std::vector<PipelineSpec> specs, load_pipeline_dir(opts.pipelines_dir));
  RAGD_RETURN_IF_ERROR(opts.validate());
  const engine::ModelOptions& mo = opts.model;
  if (sp_comm != nullptr && sp_comm->size() > 1 && mo.device != "cpu") {
    return Status::InvalidArgument("runtime.device '" + mo.device +
                                   "': sequence parallelism runs on the CPU backend only in this build (its ring "
                                   "attention needs the layer hook); run one rank");
  }
  const seqparallel::PartitionKind sp_kind = opts.sp_partition;
  ExecutorImpl::Deps deps;
  RAGD_ASSIGN_OR_RETURN(deps.model, engine::Model::load(opts.model_dir, mo));
  RAGD_ASSIGN_OR_RETURN(const seqparallel::SpillOptions spill, spill_options_with_folder(opts));
  // The long-context route's rank 0: a sibling of the model (its weights, a pool and step state of
  // its own), so that a long run steps beside the batch (sequence_parallel_route.h); a second copy
  // where the backend cannot share its weights.
  auto make_rank0 = [&]() -> Result<std::unique_ptr<engine::Model>> {
    auto sib = deps.model->sibling(mo.kv_pool_bytes, mo.num_threads);
    if (sib.ok() || sib.status().code() != StatusCode::kUnimplemented) return sib;
    log::pipelines()->info("long-context route: {}; loading a second copy of the model for it", sib.status().message());
    return engine::Model::load(opts.model_dir, mo);
  };
  if (sp_comm != nullptr && sp_comm->size() > 1) {
    if (opts.sp_workers > 1) {
      return Status::InvalidArgument("runtime.sp_workers is " + std::to_string(opts.sp_workers) + " but the process is rank 0 of a " +
                                     std::to_string(sp_comm->size()) + "-rank " + std::string(sp_comm->transport()) +
                                     " job: use one or the other");
    }
    const int ranks = sp_comm->size();
    const std::string transport(sp_comm->transport());
    RAGD_ASSIGN_OR_RETURN(deps.sp_rank0, make_rank0());
    RAGD_ASSIGN_OR_RETURN(deps.sp, seqparallel::join_group(*deps.sp_rank0, std::move(sp_comm), sp_kind));
    log::pipelines()->info("sequence parallelism: {} {} ranks ({} partition) for prompts of >= {} tokens", ranks, transport,
                           enum_name(opts.sp_partition), opts.sp_threshold_tokens);
  } else if (opts.sp_workers > 1) {
    // Each helper worker loads its own copy of the model, with its share of the cores.
    const int per_worker = std::max(1, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) / opts.sp_workers);
    engine::ModelOptions wo = mo;
    wo.num_threads = per_worker;
    const std::string dir = opts.model_dir;
    RAGD_ASSIGN_OR_RETURN(deps.sp_rank0, make_rank0());
    RAGD_ASSIGN_OR_RETURN(deps.sp, seqparallel::start_local_group(
                                       opts.sp_workers, *deps.sp_rank0, [dir, wo] { return engine::Model::load(dir, wo); },
                                       sp_kind, per_worker, opts.sp_transport, spill));
    log::pipelines()->info("sequence parallelism: {} in-process workers ({} partition, {} transport, {} thread(s) each) for "
                           "prompts of >= {} tokens",
                           opts.sp_workers, enum_name(opts.sp_partition), enum_name(opts.sp_transport), per_worker,
                           opts.sp_threshold_tokens);
  }
  if (deps.sp == nullptr && spill.enabled()) {
    // One worker: a group of rank 0 alone, for the prompts whose KV exceeds the pool.
    RAGD_ASSIGN_OR_RETURN(deps.sp_rank0, make_rank0());
    RAGD_ASSIGN_OR_RETURN(deps.sp, seqparallel::start_local_group(1, *deps.sp_rank0, nullptr, sp_kind, 0,
                                                                  seqparallel::SpTransport::kHost, spill));
  }
  if (deps.sp != nullptr) {
    deps.sp->driver().set_spill(spill);
    if (spill.enabled()) {
      log::pipelines()->info("KV spill: prompts whose KV exceeds the pool move their older KV to {} MiB of host memory{}",
                             spill.dram_bytes >> 20, spill.dir.empty() ? "" : ", then to SSD in " + spill.dir);
    }
  }
  const std::string tok_path = (std::filesystem::path(opts.model_dir) / "tokenizer.json").string();
  RAGD_ASSIGN_OR_RETURN(std::unique_ptr<engine::Tokenizer> tok, engine::Tokenizer::from_file(tok_path));
  deps.tokenizer = std::shared_ptr<const engine::Tokenizer>(std::move(tok));
  // The model's own chat template, compiled now ([prompt] chat_template = "model", the default, and
  // chat completions use it). One that does not compile leaves the built-in templates in charge.
  if (auto own = engine::ModelChatTemplate::load(opts.model_dir); !own.ok()) {
    log::pipelines()->warn("model chat template not usable, using the built-in templates: {}", own.status().message());
  } else if (*own != nullptr) {
    log::pipelines()->info("chat template: the model's own ({})", (*own)->origin());
    deps.chat_template = std::move(*own);
  }
  // A reranker (a second copy of the model, for the retrieval threads) when a pipeline asks the
  // generator to rerank; a cross-encoder stage per [retriever] rerank_model directory.
  auto reranks = [](const PipelineSpec& s) {
    return s.rerank > 0 || (s.adapt && std::any_of(s.adapt->candidates.begin(), s.adapt->candidates.end(),
                                                  [](const AdaptCandidate& c) { return c.rerank > 0; }));
  };
  for (const PipelineSpec& s : specs) {
    if (s.rerank_model.empty() || !reranks(s) || deps.cross_encoders.contains(s.rerank_model)) continue;
    auto ce = retrieval::CrossEncoderReranker::load(s.rerank_model);
    if (!ce.ok()) return ce.status().with_context("pipeline '" + s.name + "': [retriever] rerank_model");
    log::pipelines()->info("reranker {} for pipeline '{}': {}", s.rerank_model, s.name, (*ce)->identity());
    deps.cross_encoders.emplace(s.rerank_model,
                                std::make_unique<CrossEncoderStage>(std::move(*ce), deps.tokenizer));
  }
  if (std::any_of(specs.begin(), specs.end(), [&](const PipelineSpec& s) { return reranks(s) && s.rerank_model.empty(); })) {
    // Its pool (as large as the serving model's) caches the KV of the one-passage prompt heads.
    const engine::ModelOptions ro = mo;
    RAGD_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> rm, engine::Model::load(opts.model_dir, ro));
    deps.reranker = std::make_unique<Reranker>(std::move(rm), *deps.tokenizer);
    log::pipelines()->info("reranker: a second copy of {} for the pipelines with [retriever] rerank", opts.model_dir);
  }
  // Draft models of speculative method "draft" (model_drafter.h): the server's and every pipeline's,
  // each directory loaded once, each with its own engine instance and KV pool. A missing or
  // incompatible one (another vocabulary or tokenizer) stops the start, naming who asked for it.
  {
    std::vector<std::pair<std::string, std::string>> wanted;  // directory, the key that names it
    if (!opts.speculative.draft_model.empty()) wanted.emplace_back(opts.speculative.draft_model, "runtime.speculative_draft_model");
    for (const PipelineSpec& s : specs)
      if (!s.draft_model.empty())
        wanted.emplace_back(s.draft_model, "pipeline '" + s.name + "': [generation] speculative.draft_model");
    for (const auto& [dir, who] : wanted) {
      if (deps.draft_models.contains(dir)) continue;
      auto d = ModelDrafter::open(dir, mo, deps.model->config(), *deps.tokenizer);
      if (!d.ok()) return d.status().with_context(who);
      const engine::ModelConfig& dc = (*d)->model().config();
      log::pipelines()->info("draft model {}: {} layers x {}, its own KV pool of {} blocks", dir, dc.num_hidden_layers,
                             dc.hidden_size, (*d)->stats().pool_blocks);
      deps.draft_models.emplace(dir, std::move(*d));
    }
  }
  deps.pipelines = std::move(specs);
  deps.model_name = std::filesystem::path(opts.model_dir).filename().string();
  if (deps.model_name.empty()) deps.model_name = std::filesystem::path(opts.model_dir).parent_path().filename().string();

  std::unique_ptr<DocumentApi> docs = std::make_unique<NoDocuments>();
  if (!opts.data_replica_of.empty() && opts.data_dir.empty())
    return Status::InvalidArgument("runtime.data_replica_of needs runtime.data_dir: the replica's own directory "
                                   "(its RocksDB secondary scratch and SSD KV tier)");
  if (opts.replica_catch_up_ms < 1)
    return Status::InvalidArgument("runtime.replica_catch_up_ms must be >= 1, got " + std::to_string(opts.replica_catch_up_ms));
  if (!opts.data_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opts.data_dir, ec);
    if (ec) return Status::IOError(opts.data_dir + ": cannot create data directory: " + ec.message());
#if RAGD_HAVE_RETRIEVAL
    retrieval::CorpusOptions co;
    co.chunker.chunk_tokens = opts.chunk_tokens;
    // auto / hashing: the corpus keeps the embedder it was built with; a new one gets the term
    // vectors (auto, when shipped: the corpus decides, CorpusOptions::embedder) or hashed words.
    const EmbedderKind kind = opts.embedder;
    co.embedder.name = kind == EmbedderKind::kHashing ? "" : std::string(enum_name(kind));
    if (kind == EmbedderKind::kModel)
      co.embedder.model_dir = opts.embedder_model_dir.empty() ? opts.model_dir : opts.embedder_model_dir;
    if (kind == EmbedderKind::kAuto) co.embedder.model_dir = opts.embedder_model_dir;
    if (kind == EmbedderKind::kTermvec) {
      co.embedder.model_dir = opts.embedder_model_dir.empty() ? retrieval::default_termvec_dir() : opts.embedder_model_dir;
      if (co.embedder.model_dir.empty())
        return Status::InvalidArgument("runtime.embedder = \"termvec\": no term vectors (set runtime.embedder_model_dir, "
                                       "RAGD_TERMVEC_DIR, or keep the repository's models/ragd-termvec)");
    }
    co.embedder.query_prefix = opts.embedder_query_prefix;
    co.embedder.document_prefix = opts.embedder_document_prefix;
    co.embedder.dim = opts.embedder_dim;
    co.index_spec = "";
    co.secondary_of = opts.data_replica_of;  // a replica: data_dir is its scratch (and SSD KV tier)
    co.catch_up_ms = opts.replica_catch_up_ms;
    co.mode = opts.retrieval_mode;
    RAGD_ASSIGN_OR_RETURN(std::unique_ptr<retrieval::Corpus> corpus,
                          retrieval::Corpus::open(opts.data_dir, co,
                                                  deps.tokenizer));
    deps.corpus = std::shared_ptr<retrieval::Corpus>(std::move(corpus));
    deps.semantic_cache = std::make_shared<SemanticCache>();
    auto corpus_docs = std::make_unique<CorpusDocuments>(deps.corpus, deps.semantic_cache);
    {
      // Listed by its directory's name ("hashing" and "termvec" by theirs). Token-id inputs are
      // the served model's ids: the hashing and term-vector embedders read words and have no
      // tokenizer (the corpus chunks with the model's), and the model embedder on the generator's
      // own directory shares it; any other checkpoint has a tokenizer of its own.
      const retrieval::Embedder& e = deps.corpus->embedder();
      const bool words = e.name() == "hashing" || e.name() == "termvec";
      const bool own_dir = opts.embedder_model_dir.empty() || opts.embedder_model_dir == opts.model_dir;
      const std::string dir = own_dir ? opts.model_dir : opts.embedder_model_dir;
      EncoderInfo info{words ? std::string(e.name()) : dir_name(dir), e.identity(), e.dim()};
      corpus_docs->set_served(std::move(info), words || own_dir ? deps.tokenizer : nullptr);
    }
    if (!opts.rerank_model_dir.empty()) {
      RAGD_ASSIGN_OR_RETURN(auto reranker, retrieval::CrossEncoderReranker::load(opts.rerank_model_dir));
      log::pipelines()->info("reranker {}: {}", opts.rerank_model_dir, reranker->identity());
      corpus_docs->set_reranker(std::move(reranker), dir_name(opts.rerank_model_dir));
    }
    docs = std::move(corpus_docs);
#endif
  }
  RuntimeOptions eo = opts;
  if (!eo.sp_rates.has_value() && !eo.sp_rates_file.empty()) {
    RAGD_ASSIGN_OR_RETURN(eo.sp_rates, load_sp_rates(eo.sp_rates_file));
    log::pipelines()->info("sequence parallelism: elastic degree from the rates in {} ({})", eo.sp_rates_file,
                           eo.sp_rates->describe());
  }
  RAGD_ASSIGN_OR_RETURN(std::unique_ptr<ExecutorImpl> ex, ExecutorImpl::create(eo, std::move(deps)));
  Runtime rt;
  ExecutorImpl* raw = ex.get();
  rt.executor = std::move(ex);
  rt.documents = std::move(docs);
  rt.stop = [raw] { raw->stop(); };
  log::pipelines()->info("runtime ready: model {}, scheduler {}, data {}{}", opts.model_dir, enum_name(opts.scheduler.policy),
                         opts.data_dir.empty() ? "(none)" : opts.data_dir,
                         opts.data_replica_of.empty() ? "" : " (replica of " + opts.data_replica_of + ")");
  return rt;
}

}  // namespace

// Loading runs OpenMP code (weight packing, corpus checks) on a thread of its own that ends with
// it. libgomp keeps a team of worker threads for every thread that ever ran a parallel region, for
// that thread's life; once the teams hold more threads than there are cores it throttles every
// team's spin-waits to 100-1,000 iterations (measured on 2 cores, when the steps' kernels still ran
// on OpenMP: a 90-row EPIC step's dense layers took 30 ms instead of 19 while the caller's idle team
// existed). The steps' kernels now run on the kernels' own team (kernels/threads.h); the loader's
// thread still ends with the load, so no idle OpenMP team outlives it.
Result<Runtime> open_runtime(const RuntimeOptions& opts, std::unique_ptr<seqparallel::Communicator> sp_comm) {
  std::optional<Result<Runtime>> r;
  std::thread([&] { r.emplace(open_runtime_here(opts, std::move(sp_comm))); }).join();
  return std::move(*r);
}

Status serve_sp_rank(const RuntimeOptions& opts, seqparallel::Communicator& comm) {
  auto fail = [&](const Status& st) {
    log::pipelines()->error("rank {} of {}: {}", comm.rank(), comm.size(), st.to_string());
    comm.abort(st);
    return st;
  };
  if (Status st = opts.validate(); !st.ok()) return fail(st);
  auto model = engine::Model::load(opts.model_dir, opts.model);
  if (!model.ok()) return fail(model.status());
  log::pipelines()->info("rank {} of {}: serving sequence-parallel work for rank 0", comm.rank(), comm.size());
  auto spill = spill_options_with_folder(opts);
  if (!spill.ok()) return fail(spill.status());
  return seqparallel::serve_after_barrier(**model, comm, opts.sp_partition, *spill);
}

}  // namespace ragd::pipelines

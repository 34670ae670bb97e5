#include "daemon_support.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <thread>

namespace ragd::fuzz {

namespace {

using pipelines::RunEvent;

class FuzzExecutor : public pipelines::Executor {
 public:
  Status submit(pipelines::RunRequest req, pipelines::EventSink sink) override {
    if (!req.pipeline.empty() && req.pipeline != "default" && req.pipeline != "docs")
      return Status::NotFound("pipeline '" + req.pipeline + "' not found");
    RunEvent sources;
    sources.kind = RunEvent::Kind::kSources;
    sources.sources.push_back({"doc-1", 7, 0.5f, "a passage"});
    if (!sink(sources)) return Status::OK();
    // Echo a bounded piece of what was asked, so that arbitrary text reaches the encoders.
    std::string text = req.query.empty() ? req.prompt : req.query;
    if (text.empty() && !req.messages.empty()) text = req.messages.back().content;
    RunEvent tok;
    tok.kind = RunEvent::Kind::kToken;
    tok.token_id = 42;
    tok.text = text.substr(0, 64);
    tok.logprob = -0.5f;
    if (!sink(tok)) return Status::OK();
    RunEvent done;
    done.kind = RunEvent::Kind::kDone;
    done.finish_reason = "length";
    done.usage.prompt_tokens = 10;
    done.usage.completion_tokens = 1;
    done.usage.reuse = "none";
    sink(done);
    return Status::OK();
  }
  void cancel(const std::string&) override {}
  std::vector<pipelines::PipelineInfo> pipelines() const override {
    pipelines::PipelineInfo a;
    a.name = "default";
    a.reuse = "knowledge_tree";
    pipelines::PipelineInfo b;
    b.name = "docs";
    b.reuse = "prefix";
    b.kind = "iterative";
    b.overlap = "piperag";
    b.retrieval_interval = 16;
    return {a, b};
  }
  bool ready() const override { return true; }
  std::string model_name() const override { return "fuzz-llama"; }
  pipelines::ExecutorStats stats() const override {
    pipelines::ExecutorStats s;
    s.model = "fuzz-llama";
    s.policy = "fcfs";
    s.eviction = "pgdsf";
    return s;
  }
};

class FuzzDocuments : public pipelines::DocumentApi {
 public:
  Result<pipelines::IngestSummary> ingest(std::vector<pipelines::DocumentInput> docs) override {
    pipelines::IngestSummary s;
    for (const auto& d : docs) {
      if (d.text.empty()) {
        ++s.skipped;
        s.skip_reasons.push_back(d.id + ": empty text");
      } else {
        ++s.ingested;
        s.chunks += 1 + static_cast<int>(d.text.size() / 512);
      }
    }
    return s;
  }
  Result<pipelines::DocumentInfo> get(const std::string& id, const std::string&) const override {
    if (id != "doc-1") return Status::NotFound("document '" + id + "' not found");
    pipelines::DocumentInfo d;
    d.id = id;
    d.title = "Doc one";
    d.text = "The first document.";
    d.chunk_ids = {7};
    return d;
  }
  Status remove(const std::string& id, const std::string& tenant) override {
    if (id != "doc-1") return Status::NotFound("document '" + id + "' not found");
    if (!tenant.empty()) return Status::PermissionDenied("document '" + id + "' is shared");
    return Status::OK();
  }
  Result<pipelines::DocumentPage> list(const std::string&, const std::string& after, size_t limit) const override {
    pipelines::DocumentPage p;
    if (after < "doc-1" && limit > 0) p.documents.push_back({"doc-1", "Doc one", "", "", 19, 1});
    return p;
  }
  Result<std::vector<std::vector<float>>> embed(const std::vector<std::string>& texts) const override {
    std::vector<std::vector<float>> out;
    for (const auto& t : texts) out.push_back({static_cast<float>(t.size() % 7), 0.5f, -0.25f, 1.0f});
    return out;
  }
};

struct Runtime {
  FuzzExecutor executor;
  FuzzDocuments documents;
  std::unique_ptr<daemon::Api> api;
};

Runtime* make_runtime(bool auth) {
  quiet_logs();
  daemon::DaemonConfig cfg;
  if (auth) {
    cfg.auth.keys[kTenantKey] = "acme";
    cfg.auth.admin_keys[kAdminKey] = "ops";
    cfg.limits.tenants["acme"].max_concurrent = 2;
  }
  // Never destroyed: the Api's worker pool lives as long as the fuzzing process.
  auto* rt = new Runtime;
  rt->api = std::make_unique<daemon::Api>(cfg);
  rt->api->set_runtime(&rt->executor, &rt->documents);
  return rt;
}

}  // namespace

void quiet_logs() { setenv("RAGD_LOG_LEVEL", "off", 0); }

daemon::Api& fuzz_api(bool auth) {
  static Runtime* open = make_runtime(false);
  static Runtime* keyed = make_runtime(true);
  return *(auth ? keyed : open)->api;
}

int handle_and_wait(daemon::Api& api, daemon::HttpRequest req, int timeout_ms) {
  struct Answer {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int status = 0;
    std::function<void(std::shared_ptr<daemon::StreamWriter>)> stream;
  };
  auto answer = std::make_shared<Answer>();
  api.handle(std::move(req), [answer](daemon::HttpResponse r) {
    std::lock_guard<std::mutex> l(answer->mu);
    answer->status = r.status;
    answer->stream = std::move(r.stream);
    answer->done = true;
    answer->cv.notify_all();
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::function<void(std::shared_ptr<daemon::StreamWriter>)> stream;
  int status = 0;
  {
    std::unique_lock<std::mutex> l(answer->mu);
    if (!answer->cv.wait_until(l, deadline, [&] { return answer->done; })) return 0;
    status = answer->status;
    stream = std::move(answer->stream);
  }
  if (stream) {
    // An SSE answer: attach a sink and wait for the run to end the stream.
    auto w = std::make_shared<CollectingWriter>();
    stream(w);
    while (!w->finished()) {
      if (std::chrono::steady_clock::now() > deadline) return 0;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  return status;
}

bool CollectingWriter::send(std::string msg) {
  std::lock_guard<std::mutex> l(mu_);
  if (closed_ || finished_) return false;
  last_ = std::move(msg);
  ++count_;
  return true;
}

void CollectingWriter::finish() {
  std::lock_guard<std::mutex> l(mu_);
  finished_ = true;
}

void CollectingWriter::close(uint16_t, std::string) {
  std::lock_guard<std::mutex> l(mu_);
  closed_ = true;
  finished_ = true;
}

bool CollectingWriter::is_open() const {
  std::lock_guard<std::mutex> l(mu_);
  return !closed_ && !finished_;
}

bool CollectingWriter::finished() const {
  std::lock_guard<std::mutex> l(mu_);
  return finished_;
}

size_t CollectingWriter::messages() const {
  std::lock_guard<std::mutex> l(mu_);
  return count_;
}

}  // namespace ragd::fuzz

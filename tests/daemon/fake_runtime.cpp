#include "fake_runtime.h"

#include "ragd/pipelines/run_params.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

namespace ragd::testing {

FakeExecutor::~FakeExecutor() {
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& t : threads_) (void)t;
  }
  // Cancel everything still running, then join.
  std::vector<std::thread> ts;
  {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_.insert("*");
    cv_.notify_all();
    ts.swap(threads_);
  }
  for (auto& t : ts) t.join();
}

std::vector<pipelines::PipelineInfo> FakeExecutor::pipelines() const {
  return {{"default", "retrieve then generate", "knowledge_tree", 4, "Flat", 16},
          {"docs", "documentation QA", "prefix", 2, "IVF16,Flat", 8, /*number_passages=*/true}};
}

Status FakeExecutor::submit(pipelines::RunRequest req, pipelines::EventSink sink) {
  if (!req.pipeline.empty() && req.pipeline != "default" && req.pipeline != "docs")
    return Status::NotFound("unknown pipeline '" + req.pipeline + "'");
  if (reject_queue_full.load()) return Status::ResourceExhausted("executor queue is full (256 waiting)");
  std::lock_guard<std::mutex> l(mu_);
  last_ = req;
  active_.fetch_add(1);
  live_.fetch_add(1);
  threads_.emplace_back([this, req = std::move(req), sink = std::move(sink)]() mutable { run(std::move(req), std::move(sink)); });
  return Status::OK();
}

void FakeExecutor::cancel(const std::string& id) {
  cancels_.fetch_add(1);
  std::lock_guard<std::mutex> l(mu_);
  cancelled_.insert(id);
  cv_.notify_all();
}

pipelines::RunRequest FakeExecutor::last_request() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_;
}

bool FakeExecutor::wait_idle(int timeout_ms) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (active_.load() > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void FakeExecutor::admit_queued() {
  std::lock_guard<std::mutex> l(mu_);
  admitted_ = true;
  cv_.notify_all();
}

pipelines::ExecutorStats FakeExecutor::stats() const {
  const int a = live_.load();
  pipelines::ExecutorStats s;
  s.waiting = queued_.load();
  s.running = a - s.waiting;
  s.pool_blocks = 1024;
  s.pool_free_blocks = 1024 - static_cast<uint64_t>(a) * 4;
  s.tiers[0] = {"hbm", true, 1048576, static_cast<uint64_t>(a) * 4096, 0, 7, 3, 0, 0, 0};
  s.tiers[1] = {"dram", true, 0, 8192, 0, 2, 1, 0, 0, 0};
  s.tiers[2] = {"ssd", true, 0, 65536, 0, 1, 0, 0, 0, 0};
  if (ssd_tier_failed.load()) {
    s.tiers[2].enabled = false;
    s.ssd_error = "IOError: /srv/secret-volume/kvcache/000042.sst: No space left on device";
  }
  return s;
}

void FakeExecutor::run(pipelines::RunRequest req, pipelines::EventSink sink) {
  auto is_cancelled = [&] {
    std::lock_guard<std::mutex> l(mu_);
    return cancelled_.count(req.id) > 0 || cancelled_.count("*") > 0;
  };
  const std::string& q = !req.query.empty() ? req.query : !req.prompt.empty() ? req.prompt
                         : req.messages.empty() ? req.prompt : req.messages.back().content;
  const bool slow = q.find("slow") != std::string::npos;
  const bool big = q.find("big") != std::string::npos;
  const bool fail = q.find("FAIL") != std::string::npos;
  const bool queued = q.find("queued") != std::string::npos;
  // An answer that cites its passages, a marker split across tokens: "Grass [1] and water [2, 9]."
  const bool cites = q.find("citations") != std::string::npos;
  static const char* const kCiting[] = {"Grass", " [", "1] and", " water [2, 9]", "."};
  bool alive = true;
  bool refused = false;  // as the executor: a refusal cancels the run, whose done event still follows
  bool left = false;
  auto leave = [&] {  // out of the scheduler's counts, once
    if (!left) live_.fetch_sub(1);
    left = true;
  };
  auto emit = [&](const pipelines::RunEvent& ev) {
    if (!alive) return;
    if (!sink(ev)) {
      alive = false;
      refused = true;
      sink_refusals_.fetch_add(1);
    }
  };
  if (!req.pipeline.empty()) {
    pipelines::RunEvent ev;
    ev.kind = pipelines::RunEvent::Kind::kSources;
    ev.sources = {{"doc-a", 11, 0.875f, "alpha snippet"}, {"doc-b", 42, 0.5f, "beta \"quoted\" snippet"}};
    emit(ev);
  }
  if (queued) {
    // Retrieved, not yet admitted by the scheduler: waits until the test admits it (or cancels).
    queued_.fetch_add(1);
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(10), [&] { return admitted_ || cancelled_.count(req.id) || cancelled_.count("*"); });
    l.unlock();
    queued_.fetch_sub(1);
  }
  // As pipelines::resolve_run: an explicit max_tokens, else the pipeline's, else the built-in one.
  int n = pipelines::kDefaultMaxTokens;
  for (const auto& p : pipelines())
    if (p.name == req.pipeline) n = p.max_tokens;
  n = req.sampling.max_tokens.value_or(n);
  int produced = 0;
  std::string finish = "length";
  for (int i = 0; i < n && alive; ++i) {
    if (is_cancelled()) {
      finish = "cancelled";
      break;
    }
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pipelines::RunEvent ev;
    ev.kind = pipelines::RunEvent::Kind::kToken;
    ev.index = i;
    ev.token_id = static_cast<int32_t>((req.sampling.seed.value_or(0) + i) % 7);
    ev.text = big     ? std::string(64 << 10, 'x')
              : cites ? std::string(kCiting[i % 5])
                      : "w" + std::to_string(ev.token_id) + " ";
    ev.logprob = -0.25f * static_cast<float>(i % 4);
    emit(ev);
    ++produced;
    if (fail) {
      pipelines::RunEvent err;
      err.kind = pipelines::RunEvent::Kind::kError;
      err.error = Status::Internal("injected failure after one token");
      leave();
      emit(err);
      alive = false;
      break;
    }
  }
  if (refused) {
    alive = true;
    finish = "cancelled";
  }
  if (alive) {
    pipelines::RunEvent done;
    done.kind = pipelines::RunEvent::Kind::kDone;
    done.finish_reason = finish;
    done.usage.prompt_tokens = static_cast<int>(q.size() / 4 + 1);
    done.usage.completion_tokens = produced;
    done.usage.reused[kvstore::Tier::kHbm] = 3;
    done.usage.reused[kvstore::Tier::kDram] = 2;
    done.usage.reused[kvstore::Tier::kSsd] = 1;
    done.usage.recomputed_tokens = 4;
    done.timings = {1.5, 2.5, 0.5, 3.0, 4.0, 1.25, 10.0};
    leave();
    emit(done);
  }
  leave();
  active_.fetch_sub(1);
}

Result<pipelines::IngestSummary> FakeDocuments::ingest(std::vector<pipelines::DocumentInput> docs) {
  for (const auto& d : docs)  // as embedding a real document takes a while
    if (d.text.find("slow") != std::string::npos) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::lock_guard<std::mutex> l(mu_);
  pipelines::IngestSummary s;
  // As the corpus: a tenant updates its own document even when a shared one has the same id.
  for (const auto& d : docs)
    if (!d.tenant.empty() && !docs_.count({d.tenant, d.id}) && docs_.count({"", d.id}))
      return Status::PermissionDenied("document '" + d.id + "' is shared and read-only");
  for (auto& d : docs) {
    if (d.text.empty()) {
      s.skipped++;
      s.skip_reasons.push_back(d.id + ": empty text");
      continue;
    }
    auto key = std::make_pair(d.tenant, d.id);
    auto it = docs_.find(key);
    if (it != docs_.end() && it->second.text == d.text) {
      s.unchanged++;
      continue;
    }
    if (it != docs_.end()) s.replaced++;
    else s.ingested++;
    s.chunks += static_cast<int>(d.text.size() / 32 + 1);
    docs_[key] = d;
  }
  return s;
}

Result<pipelines::DocumentInfo> FakeDocuments::get(const std::string& id, const std::string& tenant) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = docs_.find({tenant, id});
  if (it == docs_.end()) it = docs_.find({"", id});
  if (it == docs_.end()) return Status::NotFound("document '" + id + "' not found");
  pipelines::DocumentInfo info;
  info.id = id;
  info.title = it->second.title;
  info.source = it->second.source;
  info.tenant = it->second.tenant;
  info.content_hash = "h" + std::to_string(std::hash<std::string>()(it->second.text) % 100000);
  info.chunk_ids = {1, 2};
  info.text = it->second.text;
  return info;
}

Status FakeDocuments::remove(const std::string& id, const std::string& tenant) {
  std::lock_guard<std::mutex> l(mu_);
  if (docs_.erase({tenant, id})) return Status::OK();
  if (!tenant.empty() && docs_.count({"", id})) return Status::PermissionDenied("document '" + id + "' is shared and read-only");
  return Status::NotFound("document '" + id + "' not found");
}

Result<pipelines::DocumentPage> FakeDocuments::list(const std::string& tenant, const std::string& after,
                                                    size_t limit) const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<pipelines::DocumentSummary> all;
  for (const auto& [key, d] : docs_)
    if ((key.first == tenant || key.first.empty()) && d.id > after)
      all.push_back({d.id, d.title, d.source, d.tenant, d.text.size(), d.text.size() / 32 + 1});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.id != b.id ? a.id < b.id : (!a.tenant.empty() && b.tenant.empty());
  });
  pipelines::DocumentPage page;
  size_t n = std::min(limit, all.size());
  while (n > 0 && n < all.size() && all[n].id == all[n - 1].id) ++n;
  page.has_more = n < all.size();
  all.resize(n);
  page.documents = std::move(all);
  return page;
}

std::vector<float> FakeDocuments::embed_one(const std::string& text) {
  std::vector<float> v(8, 0.0f);
  for (size_t i = 0; i < text.size(); ++i) v[i % 8] += static_cast<float>(static_cast<unsigned char>(text[i]) % 13) + 1.0f;
  double n = 0;
  for (float x : v) n += double(x) * x;
  for (float& x : v) x = static_cast<float>(x / std::sqrt(n));
  return v;
}

Result<std::vector<std::vector<float>>> FakeDocuments::embed(const std::vector<std::string>& texts) const {
  std::vector<std::vector<float>> out;
  for (const auto& t : texts) out.push_back(embed_one(t));
  return out;
}

}  // namespace ragd::testing

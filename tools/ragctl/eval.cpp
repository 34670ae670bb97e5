// ragctl eval: answer accuracy of a RAG pipeline on a question set with gold answers.
//
//   ragctl eval --questions Q.jsonl (--model DIR --data DIR | --url http://host:port)
//               [--pipeline default] [--reuse none,prefix,knowledge_tree,cacheblend:0.15,epic:16] [--context retrieved|gold|both]
//               [--top-k K] [--max-tokens 16] [--limit N] [--json FILE]
//               [--pipelines DIR] [--overlap none,piperag,speculative,both] [--retrieval-interval N]
//               [--concurrency N] [--adapt auto,NAME,...] [--adapt-objective O] [--slo-ttft-ms MS]
//               [--fit-adapt [--fit-out FILE] [--fit-concurrency 1,4,16] [--fit-ttft-quantile 0.99]]
//
// --concurrency N keeps N questions in flight (N clients): accuracy and latency under load in one
// run (TTFT p50 / p99 beside exact match). --adapt runs an adaptive pipeline ([adapt]) once per
// entry: `auto` lets its policy choose per question, a candidate's name forces that configuration.
// --fit-adapt fits the adaptive pipeline's profile (eval_adapt_fit.cpp): every candidate answers
// every question, then per candidate a model of a right answer over the query signals and of TTFT
// over the load (a mean, and a quantile, p99 by default, which an SLO bounds); written beside the
// spec (--pipelines DIR/<spec stem>.profile) or to --fit-out.
//
// --overlap runs every reuse mode once per overlap mode of an iterative pipeline (retrieval during
// generation, --pipelines names the directory of its spec in local mode): PipeRAG's stale query
// may change answers, speculative and both must not.
// A question line is {"id": "...", "question": "...", "answer": "...", "gold": "doc id", "kind": "..."}
// (id, gold and kind optional). Each question runs through the whole path (retrieval -> prompt ->
// greedy generation) once per reuse mode; with --context gold the gold document is forced into the
// retrieved context (it replaces the lowest-ranked passage unless already retrieved), which tells
// retrieval errors from generation errors. Reports exact match and token F1 (SQuAD normalisation),
// retrieval hit rate (gold document among the sources), and for every mode after the first the
// number of answers identical to the first mode's.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include "command.h"
#include "enum_option.h"
#include "eval_score.h"
#include "ragd/common/json_writer.h"
#include "ragd/common/status.h"
#include "ragd/daemon/client.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/runtime.h"
#include "eval_adapt_fit.h"
#include "eval_load.h"
#include "run_print.h"

namespace ragd::tools {
namespace {


// Reads the question file; an error names the file and line.
Result<std::vector<EvalQuestion>> read_questions(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError(path + ": cannot open");
  std::vector<EvalQuestion> out;
  simdjson::dom::parser parser;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](const std::string& what) { return Status::InvalidArgument(fmt::format("{}:{}: {}", path, lineno, what)); };
    simdjson::dom::element e;
    if (parser.parse(line).get(e) || !e.is_object()) return bad("not a JSON object");
    EvalQuestion q;
    auto field = [&](const char* key, std::string* dst, bool required) -> Status {
      simdjson::dom::element v;
      if (e[key].get(v)) return required ? bad(fmt::format("missing \"{}\"", key)) : Status::OK();
      std::string_view s;
      if (v.get_string().get(s)) return bad(fmt::format("\"{}\" must be a string", key));
      *dst = std::string(s);
      return Status::OK();
    };
    RAGD_RETURN_IF_ERROR(field("question", &q.question, true));
    RAGD_RETURN_IF_ERROR(field("answer", &q.answer, true));
    RAGD_RETURN_IF_ERROR(field("id", &q.id, false));
    RAGD_RETURN_IF_ERROR(field("gold", &q.gold, false));
    RAGD_RETURN_IF_ERROR(field("kind", &q.kind, false));
    if (q.question.empty()) return bad("\"question\" is empty");
    if (q.id.empty()) q.id = fmt::format("line{}", lineno);
    out.push_back(std::move(q));
  }
  if (out.empty()) return Status::InvalidArgument(path + ": no questions");
  return out;
}

// One --reuse entry: a mode name, optionally with its parameter: cacheblend:R (recompute ratio,
// 0..1) or epic:K (tokens recomputed per document).
struct EvalMode {
  std::string label;  // as given
  std::string name;
  std::optional<double> recompute_ratio;
  std::optional<int> epic_k;
  std::optional<pipelines::RetrievalOverlap> overlap;  // iterative pipelines
  std::optional<std::string> adapt;                    // adaptive pipelines: "auto" or a candidate
};

Result<EvalMode> parse_eval_mode(const std::string& spec) {
  EvalMode m;
  m.label = spec;
  const size_t colon = spec.find(':');
  m.name = spec.substr(0, colon);
  RAGD_ASSIGN_OR_RETURN(const pipelines::ReuseMode mode, pipelines::parse_reuse_mode(m.name));
  if (colon == std::string::npos) return m;
  const std::string param = spec.substr(colon + 1);
  pipelines::BlendParams bp;
  char* end = nullptr;
  if (mode == pipelines::ReuseMode::kCacheBlend) {
    bp.recompute_ratio = std::strtod(param.c_str(), &end);
    m.recompute_ratio = bp.recompute_ratio;
  } else if (mode == pipelines::ReuseMode::kEpic) {
    bp.epic_k = static_cast<int>(std::strtol(param.c_str(), &end, 10));
    m.epic_k = bp.epic_k;
  } else {
    return Status::InvalidArgument("'" + spec + "': only cacheblend:RATIO and epic:K take a parameter");
  }
  if (param.empty() || *end != '\0') return Status::InvalidArgument("'" + spec + "': '" + param + "' is not a number");
  RAGD_RETURN_IF_ERROR(bp.validate());
  return m;
}

// Runs one question. LocalRunner is thread-safe (one runtime serves every worker); HttpRunner is
// thread-compatible (one per worker).
class EvalRunner {
 public:
  virtual ~EvalRunner() = default;
  virtual Result<EvalAnswer> ask(const EvalQuestion& q, const EvalMode& reuse, bool gold_context) = 0;
};

struct Args {
  std::string questions, model, data, url, api_key = default_api_key(), pipeline = "default", json;
  std::string reuse = "none", context = "retrieved", pipelines_dir, overlap;
  int max_tokens = 16, limit = 0, threads = 0, top_k = -1, retrieval_interval = 0;
  int concurrency = 1;                 // questions in flight
  std::string adapt, adapt_objective;  // adaptive pipelines: runs per entry; objective override
  double slo_ttft_ms = 0;              // adaptive pipelines: TTFT target override (0 = the pipeline's)
  bool fit_adapt = false;
  std::string fit_out, fit_concurrency;  // --fit-adapt: the profile's file; load levels ("1,16")
  double fit_ttft_quantile = 0.99;       // --fit-adapt: the TTFT quantile fitted (0 = none)
  engine::WeightFormat weights = engine::ModelOptions{}.weights;  // weights in memory (local mode)
  kernels::KvDtype kv_dtype = engine::ModelOptions{}.kv_dtype;    // KV pool storage (local mode)
  bool no_blend_check = false;
};

class LocalRunner final : public EvalRunner {
 public:
  static Result<std::unique_ptr<EvalRunner>> open(const Args& a) {
    pipelines::RuntimeOptions o;
    o.model_dir = a.model;
    o.data_dir = a.data;
    o.model.num_threads = a.threads;
    o.model.weights = a.weights;
    o.model.kv_dtype = a.kv_dtype;
    o.pipelines_dir = a.pipelines_dir;
    o.blend_check.enabled = !a.no_blend_check;
    RAGD_ASSIGN_OR_RETURN(auto rt, pipelines::open_runtime(o));
    auto r = std::unique_ptr<LocalRunner>(new LocalRunner(a));
    r->rt_ = std::move(rt);
    return std::unique_ptr<EvalRunner>(std::move(r));
  }
  ~LocalRunner() override {
    if (rt_.stop) rt_.stop();
  }

  Result<EvalAnswer> ask(const EvalQuestion& q, const EvalMode& reuse, bool gold_context) override {
    pipelines::RunRequest req;
    req.id = fmt::format("eval-{}-{}", q.id, ++seq_);
    req.pipeline = a_.pipeline;
    req.query = q.question;
    req.retrieval_top_k = a_.top_k;
    RAGD_ASSIGN_OR_RETURN(req.reuse, pipelines::parse_reuse_mode(reuse.name));
    req.recompute_ratio = reuse.recompute_ratio;
    req.epic_k = reuse.epic_k;
    req.overlap = reuse.overlap;
    if (reuse.overlap && a_.retrieval_interval > 0) req.retrieval_interval = a_.retrieval_interval;
    req.sampling.temperature = 0.0f;
    req.sampling.max_tokens = a_.max_tokens;
    if (gold_context) req.context_must_include = q.gold;
    req.adapt = reuse.adapt;
    if (!a_.adapt_objective.empty()) {
      RAGD_ASSIGN_OR_RETURN(req.adapt_objective, parse_enum<pipelines::AdaptObjective>(a_.adapt_objective));
    }
    if (a_.slo_ttft_ms > 0) req.slo_ttft_ms = a_.slo_ttft_ms;
    auto done = std::make_shared<std::promise<Result<EvalAnswer>>>();
    auto ans = std::make_shared<EvalAnswer>();
    Status s = rt_.executor->submit(std::move(req), [done, ans](const pipelines::RunEvent& ev) {
      switch (ev.kind) {
        case pipelines::RunEvent::Kind::kSources:
          for (const auto& src : ev.sources) ans->sources.push_back(src.doc_id);
          break;
        case pipelines::RunEvent::Kind::kToken: ans->text += ev.text; break;
        case pipelines::RunEvent::Kind::kDone:
          ans->prompt_tokens = ev.usage.prompt_tokens;
          ans->reused_tokens = ev.usage.reused_tokens();
          ans->ttft_ms = ev.timings.ttft_ms;
          ans->approximate = ev.usage.approximate;
          if (ev.usage.adapt) ans->adapt = adapt_answer(*ev.usage.adapt);
          done->set_value(std::move(*ans));
          break;
        case pipelines::RunEvent::Kind::kError: done->set_value(ev.error); break;
      }
      return true;
    });
    if (!s.ok()) return s;
    return done->get_future().get();
  }

 private:
  explicit LocalRunner(const Args& a) : a_(a) {}
  Args a_;
  pipelines::Runtime rt_;
  std::atomic<uint64_t> seq_{0};
};

class HttpRunner final : public EvalRunner {
 public:
  static Result<std::unique_ptr<EvalRunner>> open(const Args& a) {
    RAGD_ASSIGN_OR_RETURN(auto url, daemon::parse_url(a.url));
    return std::unique_ptr<EvalRunner>(new HttpRunner(a, url.host, url.port));
  }

  Result<EvalAnswer> ask(const EvalQuestion& q, const EvalMode& reuse, bool gold_context) override {
    JsonWriter w;
    w.begin_object().key("query").value(q.question).key("max_tokens").value(a_.max_tokens);
    w.key("temperature").value(0).key("reuse").value(reuse.name);
    if (reuse.recompute_ratio) w.key("recompute_ratio").value(*reuse.recompute_ratio);
    if (reuse.epic_k) w.key("epic_k").value(*reuse.epic_k);
    if (reuse.overlap) {
      w.key("overlap").value(std::string(pipelines::overlap_name(*reuse.overlap)));
      if (a_.retrieval_interval > 0) w.key("retrieval_interval").value(a_.retrieval_interval);
    }
    if (a_.top_k > 0) w.key("top_k").value(a_.top_k);
    if (gold_context) w.key("context_must_include").value(q.gold);
    if (reuse.adapt) w.key("adapt").value(*reuse.adapt);
    if (!a_.adapt_objective.empty()) w.key("adapt_objective").value(a_.adapt_objective);
    if (a_.slo_ttft_ms > 0) w.key("slo_ttft_ms").value(a_.slo_ttft_ms);
    w.end_object();
    daemon::Headers h;
    if (!a_.api_key.empty()) h.emplace_back("Authorization", "Bearer " + a_.api_key);
    RAGD_ASSIGN_OR_RETURN(auto r, client_.request("POST", "/v1/pipelines/" + a_.pipeline + "/runs", w.take(), h));
    simdjson::dom::element doc;
    if (parser_.parse(r.body).get(doc))
      return Status::Internal(fmt::format("HTTP {}: response is not JSON", r.status));
    if (r.status != 200)
      return Status::Internal(fmt::format("HTTP {} {}: {}", r.status, jstr(doc, "/error/code"), jstr(doc, "/error/message")));
    EvalAnswer ans;
    ans.text = jstr(doc, "/output");
    simdjson::dom::array srcs;
    if (!doc["sources"].get_array().get(srcs))
      for (auto s : srcs) ans.sources.push_back(jstr(s, "/doc_id"));
    ans.prompt_tokens = static_cast<int>(jnum(doc, "/usage/prompt_tokens"));
    ans.reused_tokens = static_cast<int>(jnum(doc, "/usage/reused_tokens/hbm") + jnum(doc, "/usage/reused_tokens/dram") +
                                         jnum(doc, "/usage/reused_tokens/ssd"));
    ans.ttft_ms = jnum(doc, "/timings/ttft_ms");
    bool approx = false;
    if (!doc.at_pointer("/usage/approximate").get_bool().get(approx)) ans.approximate = approx;
    simdjson::dom::element adapt;
    if (!doc.at_pointer("/usage/adapt").get(adapt)) {
      EvalAdapt x;
      x.choice = jstr(adapt, "/choice");
      x.reason = jstr(adapt, "/reason");
      for (size_t i = 0; i < pipelines::kNumAdaptSignals; ++i)
        x.signals[i] = jnum(adapt, ("/signals/" + std::string(pipelines::kAdaptSignalNames[i])).c_str());
      x.ahead = static_cast<int>(jnum(adapt, "/load/ahead"));
      x.work_ahead = jnum(adapt, "/load/work_ahead_tokens");
      ans.adapt = std::move(x);
    }
    return ans;
  }

 private:
  HttpRunner(const Args& a, std::string host, uint16_t port) : a_(a), client_(std::move(host), port, 600000) {}
  Args a_;
  daemon::HttpClient client_;
  simdjson::dom::parser parser_;
};

struct Tally {
  int n = 0, em = 0, hits = 0, with_gold = 0, identical = 0, approximate = 0;
  double f1 = 0, ttft = 0;
  int64_t prompt = 0, reused = 0;
  void add(const EvalQuestion& q, const EvalAnswer& a, bool same_as_first) {
    ++n;
    em += exact_match(a.text, q.answer);
    f1 += token_f1(a.text, q.answer);
    if (!q.gold.empty()) {
      ++with_gold;
      hits += std::find(a.sources.begin(), a.sources.end(), q.gold) != a.sources.end();
    }
    identical += same_as_first;
    approximate += a.approximate;
    ttft += a.ttft_ms;
    prompt += a.prompt_tokens;
    reused += a.reused_tokens;
  }
  double pct(int x) const { return n ? 100.0 * x / n : 0.0; }
};

int run_eval(const Args& a) {
  auto qs = read_questions(a.questions);
  if (!qs.ok()) {
    std::fprintf(stderr, "ragctl eval: %s\n", qs.status().message().c_str());
    return 2;
  }
  if (a.limit > 0 && static_cast<size_t>(a.limit) < qs->size()) qs->resize(a.limit);
  std::vector<EvalMode> modes;
  {
    std::stringstream ss(a.reuse);
    for (std::string m; std::getline(ss, m, ',');)
      if (!m.empty()) {
        auto p = parse_eval_mode(m);
        if (!p.ok()) {
          std::fprintf(stderr, "ragctl eval: --reuse: %s\n", p.status().message().c_str());
          return 2;
        }
        modes.push_back(std::move(p).value());
      }
  }
  if (!a.overlap.empty()) {
    std::vector<EvalMode> crossed;
    std::stringstream ss(a.overlap);
    for (std::string o; std::getline(ss, o, ',');) {
      if (o.empty()) continue;
      auto ov = pipelines::parse_overlap(o);
      if (!ov.ok()) {
        std::fprintf(stderr, "ragctl eval: --overlap: %s\n", ov.status().message().c_str());
        return 2;
      }
      for (EvalMode m : modes) {
        m.overlap = *ov;
        m.label += "/" + o;
        crossed.push_back(std::move(m));
      }
    }
    modes = std::move(crossed);
  }
  if (!a.adapt.empty()) {
    std::vector<EvalMode> crossed;
    std::stringstream ss(a.adapt);
    for (std::string c; std::getline(ss, c, ',');) {
      if (c.empty()) continue;
      for (EvalMode m : modes) {
        m.adapt = c;
        m.label += "/" + c;
        if (c == "auto" && a.slo_ttft_ms > 0) m.label += fmt::format("@slo{}", a.slo_ttft_ms);
        crossed.push_back(std::move(m));
      }
    }
    modes = std::move(crossed);
  }
  if (a.concurrency < 1) {
    std::fprintf(stderr, "ragctl eval: --concurrency must be at least 1\n");
    return 2;
  }
  std::vector<bool> contexts;
  if (a.context == "retrieved" || a.context == "both") contexts.push_back(false);
  if (a.context == "gold" || a.context == "both") contexts.push_back(true);
  if (modes.empty() || contexts.empty()) {
    std::fprintf(stderr, "ragctl eval: --reuse needs at least one mode; --context is retrieved, gold or both\n");
    return 2;
  }
  if (contexts.back())
    for (const auto& q : *qs)
      if (q.gold.empty()) {
        std::fprintf(stderr, "ragctl eval: --context gold needs a \"gold\" document id on every question (%s has none)\n",
                     q.id.c_str());
        return 2;
      }
  std::vector<int> fit_levels;
  if (a.fit_adapt) {
    std::stringstream ss(a.fit_concurrency.empty() ? std::to_string(a.concurrency) : a.fit_concurrency);
    for (std::string l; std::getline(ss, l, ',');) {
      char* end = nullptr;
      const long v = std::strtol(l.c_str(), &end, 10);
      if (l.empty() || *end != '\0' || v < 1 || v > 1024) {
        std::fprintf(stderr, "ragctl eval: --fit-concurrency: '%s' is not a number of clients (1..1024)\n", l.c_str());
        return 2;
      }
      fit_levels.push_back(static_cast<int>(v));
    }
  }
  if (a.fit_adapt && !(a.fit_ttft_quantile >= 0 && a.fit_ttft_quantile < 1)) {
    std::fprintf(stderr, "ragctl eval: --fit-ttft-quantile must be in [0, 1) (0 = no quantile model), got %g\n",
                 a.fit_ttft_quantile);
    return 2;
  }
  int max_workers = a.concurrency;
  for (int l : fit_levels) max_workers = std::max(max_workers, l);
  // One runner per worker over HTTP; in local mode one runtime serves every worker.
  std::vector<std::unique_ptr<EvalRunner>> owned;
  std::vector<EvalRunner*> workers;
  for (int w = 0; w < max_workers; ++w) {
    Result<std::unique_ptr<EvalRunner>> runner = Status::InvalidArgument("give --url, or --model and --data");
    if (!a.url.empty()) runner = HttpRunner::open(a);
    else if (!owned.empty()) {
      workers.push_back(owned.front().get());
      continue;
    } else if (!a.model.empty() && !a.data.empty()) runner = LocalRunner::open(a);
    if (!runner.ok()) {
      std::fprintf(stderr, "ragctl eval: %s\n", runner.status().message().c_str());
      return 2;
    }
    owned.push_back(std::move(runner).value());
    workers.push_back(owned.back().get());
  }
  auto ask_at = [&](const EvalMode& mode, bool gold, int concurrency) {
    return answer_all(qs->size(), concurrency,
                      [&](int w, size_t i) { return workers[static_cast<size_t>(w)]->ask((*qs)[i], mode, gold); });
  };
  auto ask_all = [&](const EvalMode& mode, bool gold) { return ask_at(mode, gold, a.concurrency); };
  if (a.fit_adapt) {
    FitAdaptArgs f;
    f.questions = a.questions;
    f.pipeline = a.pipeline;
    f.pipelines_dir = a.pipelines_dir;
    f.out = a.fit_out;
    f.levels = fit_levels;
    f.ttft_quantile = a.fit_ttft_quantile;
    return run_fit_adapt(f, *qs, [&](const std::function<std::string(size_t)>& candidate_of, int concurrency) {
      return answer_all(qs->size(), concurrency, [&](int w, size_t i) {
        EvalMode m = modes.front();
        m.adapt = candidate_of(i);
        return workers[static_cast<size_t>(w)]->ask((*qs)[i], m, false);
      });
    });
  }

  JsonWriter jw;
  jw.begin_object().key("questions_file").value(a.questions).key("pipeline").value(a.pipeline).key("runs").begin_array();
  std::printf("ragctl eval: %zu questions, pipeline %s, top_k %s, greedy, max %d tokens, %d in flight\n", qs->size(),
              a.pipeline.c_str(), a.top_k > 0 ? std::to_string(a.top_k).c_str() : "of the pipeline", a.max_tokens,
              a.concurrency);
  std::printf("%-10s %-26s %7s %7s %10s %10s %9s %9s %7s %8s %8s %7s\n", "context", "reuse", "EM", "F1", "gold@k",
              "identical", "reused", "TTFT ms", "approx", "p50 ms", "p99 ms", "q/s");
  int failures = 0;
  for (bool gold : contexts) {
    std::vector<std::string> first;
    for (size_t m = 0; m < modes.size(); ++m) {
      Tally t;
      std::map<std::string, Tally> by_kind;
      jw.begin_object().key("context").value(gold ? "gold" : "retrieved").key("reuse").value(modes[m].label);
      jw.key("results").begin_array();
      const auto t0 = std::chrono::steady_clock::now();
      auto answers = ask_all(modes[m], gold);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::vector<double> ttfts;
      std::map<std::string, int> choices;
      for (size_t i = 0; i < qs->size(); ++i) {
        const auto& q = (*qs)[i];
        const Result<EvalAnswer>& ans = *answers[i];
        if (!ans.ok()) {
          std::fprintf(stderr, "ragctl eval: %s: %s\n", q.id.c_str(), ans.status().message().c_str());
          ++failures;
          continue;
        }
        if (m == 0) first.push_back(ans->text);
        ttfts.push_back(ans->ttft_ms);
        if (ans->adapt) ++choices[ans->adapt->choice];
        const bool same = m > 0 && i < first.size() && first[i] == ans->text;
        t.add(q, *ans, same);
        if (!q.kind.empty()) by_kind[q.kind].add(q, *ans, same);
        jw.begin_object().key("id").value(q.id).key("question").value(q.question).key("gold_answer").value(q.answer);
        jw.key("output").value(ans->text).key("exact_match").value(exact_match(ans->text, q.answer));
        jw.key("f1").value(token_f1(ans->text, q.answer)).key("sources").begin_array();
        for (const auto& s : ans->sources) jw.value(s);
        jw.end_array().key("prompt_tokens").value(ans->prompt_tokens).key("reused_tokens").value(ans->reused_tokens);
        jw.key("ttft_ms").value(ans->ttft_ms);
        if (ans->adapt)
          jw.key("adapt_choice").value(ans->adapt->choice).key("adapt_reason").value(ans->adapt->reason).key("adapt_ahead").value(ans->adapt->ahead);
        jw.end_object();
      }
      const double p50 = percentile(ttfts, 50), p99 = percentile(ttfts, 99);
      jw.end_array().key("n").value(t.n).key("exact_match").value(t.pct(t.em) / 100).key("f1").value(t.n ? t.f1 / t.n : 0);
      jw.key("gold_retrieved").value(t.with_gold ? static_cast<double>(t.hits) / t.with_gold : 0.0);
      if (m > 0) jw.key("identical_to_first").value(t.identical);
      jw.key("approximate_runs").value(t.approximate);
      jw.key("by_kind").begin_object();
      for (const auto& [k, kt] : by_kind)
        jw.key(k).begin_object().key("n").value(kt.n).key("exact_match").value(kt.pct(kt.em) / 100).end_object();
      jw.end_object().key("seconds").value(secs).key("concurrency").value(a.concurrency);
      jw.key("ttft_mean_ms").value(t.n ? t.ttft / t.n : 0.0).key("ttft_p50_ms").value(p50).key("ttft_p99_ms").value(p99);
      jw.key("questions_per_second").value(secs > 0 ? t.n / secs : 0.0);
      jw.key("adapt_choices").begin_object();
      for (const auto& [c, k] : choices) jw.key(c).value(k);
      jw.end_object().end_object();
      const std::string ident = m == 0 ? "-" : fmt::format("{}/{}", t.identical, t.n);
      std::printf("%-10s %-26s %6.1f%% %6.1f%% %9.1f%% %10s %8.1f%% %9.1f %6.1f%% %8.1f %8.1f %7.2f\n",
                  gold ? "gold" : "retrieved", modes[m].label.c_str(), t.pct(t.em), t.n ? 100 * t.f1 / t.n : 0.0,
                  t.with_gold ? 100.0 * t.hits / t.with_gold : 0.0, ident.c_str(),
                  t.prompt ? 100.0 * t.reused / t.prompt : 0.0, t.n ? t.ttft / t.n : 0.0, t.pct(t.approximate), p50,
                  p99, secs > 0 ? t.n / secs : 0.0);
      if (!choices.empty()) {
        std::string line;
        for (const auto& [c, k] : choices) line += fmt::format("  {} {}", c, k);
        std::printf("           adapt choices:%s\n", line.c_str());
      }
      if (m == 0 && !by_kind.empty()) {
        std::string kinds;
        for (const auto& [k, kt] : by_kind) kinds += fmt::format("  {} {:.1f}% ({})", k, kt.pct(kt.em), kt.n);
        std::printf("           by kind:%s\n", kinds.c_str());
      }
    }
  }
  jw.end_array().key("failures").value(failures).end_object();
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    if (!f || !(f << jw.take() << "\n")) {
      std::fprintf(stderr, "ragctl eval: %s: cannot write\n", a.json.c_str());
      return 1;
    }
  }
  return failures ? 1 : 0;
}

Registration reg("eval", "answer accuracy (exact match, F1) of a pipeline on questions with gold answers",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<Args>();
                   sub.add_option("--questions", a->questions, "questions JSONL")->required();
                   sub.add_option("--model", a->model, "model directory (local mode)");
                   sub.add_option("--data", a->data, "data directory with the ingested corpus (local mode)");
                   sub.add_option("--url", a->url, "daemon URL (instead of --model/--data)");
                   sub.add_option("--api-key", a->api_key, "API key (default $RAGD_API_KEY)");
                   sub.add_option("--pipeline", a->pipeline, "pipeline name")->capture_default_str();
                   sub.add_option("--reuse", a->reuse, "comma-separated reuse modes to run")->capture_default_str();
                   sub.add_option("--context", a->context, "retrieved | gold | both")->capture_default_str();
                   sub.add_option("--max-tokens", a->max_tokens, "tokens per answer")->capture_default_str();
                   sub.add_option("--limit", a->limit, "first N questions only");
                   sub.add_option("--top-k", a->top_k, "passages per prompt (default: the pipeline's)");
                   sub.add_option("--threads", a->threads, "engine threads in local mode (0 = all cores)");
                   add_enum_option(sub, "--weights", &a->weights, "weights in memory in local mode");
                   add_enum_option(sub, "--kv-dtype", &a->kv_dtype, "KV pool storage in local mode");
                   sub.add_option("--json", a->json, "write per-question results and summaries to this file");
                   sub.add_option("--pipelines", a->pipelines_dir, "pipeline spec directory (local mode)");
                   sub.add_option("--overlap", a->overlap,
                                  "iterative pipelines: comma-separated overlap modes (none, piperag, speculative, both)");
                   sub.add_option("--retrieval-interval", a->retrieval_interval,
                                  "iterative pipelines: generated tokens between retrievals (default: the pipeline's)");
                   sub.add_option("--concurrency", a->concurrency,
                                  "questions in flight at once (clients); TTFT p50 / p99 are reported beside EM")
                       ->capture_default_str();
                   sub.add_option("--adapt", a->adapt,
                                  "adaptive pipelines: comma-separated runs, each `auto` (the policy chooses) or a "
                                  "candidate's name (forced)");
                   sub.add_option("--adapt-objective", a->adapt_objective,
                                  "adaptive pipelines: quality | balanced | latency (default: the pipeline's)");
                   sub.add_option("--slo-ttft-ms", a->slo_ttft_ms, "adaptive pipelines: TTFT target in ms (default: the pipeline's)");
                   sub.add_flag("--fit-adapt", a->fit_adapt,
                                "fit the adaptive pipeline's profile on these questions (every candidate answers each) and "
                                "write it beside its spec in --pipelines DIR");
                   sub.add_option("--fit-out", a->fit_out, "--fit-adapt: write the profile here instead");
                   sub.add_option("--fit-concurrency", a->fit_concurrency,
                                  "--fit-adapt: comma-separated load levels (clients) every candidate runs at; the "
                                  "TTFT model is fitted over all of them, the quality model on the first (default: "
                                  "--concurrency)");
                   sub.add_option("--fit-ttft-quantile", a->fit_ttft_quantile,
                                  "--fit-adapt: the TTFT quantile the profile predicts under load, which the SLO "
                                  "bounds (0 = none: the mean)")
                       ->capture_default_str();
                   sub.add_flag("--no-blend-check", a->no_blend_check,
                                "local mode: use cacheblend / epic whatever the reuse self-check says (raw approximate accuracy)");
                   return [a]() { return run_eval(*a); };
                 });

}  // namespace
}  // namespace ragd::tools

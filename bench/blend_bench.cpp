// Approximate KV reuse (CacheBlend, EPIC) against full prefill: fidelity and TTFT.
//
//   bench_blend --model DIR [--corpus examples/qa_eval/corpus.jsonl] [--questions examples/qa_eval/questions.jsonl]
//               [--section fidelity|ttft|both] [--cases 24] [--greedy 32] [--requests 60] [--docs 4]
//               [--warmup 0] [--zipf 0.9] [--threads N] [--device cpu|cuda:N] [--no-blend-check] [--out DIR]
//               [--json FILE] [--seen] [--compare] [--modes none,cacheblend,...] [--clients 1] [--weights auto|f32|bf16|f16|q8]
//
// Fidelity: prompts of the default pipeline built from the QA corpus (a question, its gold passage
// and docs-1 other passages, in a random order). Each prompt runs with full prefill and with the
// documents' chunk KV placed and repaired (measure_fidelity): max |Δlogit| and KL of the first
// token, greedy agreement over --greedy tokens, for naive concatenation (r = 0), CacheBlend
// r ∈ {5, 15, 30} % and EPIC k ∈ {4, 16, 32}.
//
// TTFT: the QA corpus ingested into a fresh data dir; each request draws --docs distinct passages
// with Zipf(--zipf) popularity over the passages with a one-word place and asks for them by their
// place names, so popular
// passages recur in ever new combinations (the retrieved set is checked: "set hit" is the
// fraction of drawn passages retrieved). The same sequence runs, closed loop with one client, on a
// freshly opened runtime (empty caches) per reuse mode: none, prefix, knowledge_tree, cacheblend
// (r 0.15), epic (k 16) (or --modes); the first --warmup requests (same distribution) are not measured.
// --seen: before them, every passage of the measured requests once, in other combinations, so that
// every measured passage was seen before (the recombined-documents workload CacheBlend and EPIC are
// for). --compare: also cacheblend@admission / epic@admission, the earlier path (first-seen
// passages' chunk KV and the repair as steps of their own at admission, the question after).
// --doc-repeat N: each passage's text N times over (2: ~250-token documents, ~1,000-token prompts).
// --max-tokens N: tokens generated per measured request (default 4).
// --clients N: the measured requests from N closed-loop clients (requests/s over their window). Reported: TTFT p50 / p99, prompt tokens reused (any tier), approximate
// runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <atomic>
#include <condition_variable>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <simdjson.h>

#include "ragd/engine/model.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/blend_fidelity.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/prompt_builder.h"
#include "ragd/pipelines/runtime.h"
#include "bench_args.h"
#include "blend_prompts.h"
#include "run_client.h"

namespace fs = std::filesystem;
using namespace ragd;
using namespace ragd::pipelines;

namespace {

struct Passage {
  std::string id, title, text, place;
};
struct Question {
  std::string question, gold;
};

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

// The place a QA passage is about: its title is "<Topic> at <Place>".
std::string place_of(const std::string& title) {
  const size_t at = title.find(" at ");
  return at == std::string::npos ? title : title.substr(at + 4);
}

struct Mode {
  std::string label;
  ReuseMode mode;
  BlendParams params;
};

int fidelity(const std::string& model_dir, const std::string& device, const std::vector<Passage>& corpus,
             const std::vector<Question>& qs, int cases, int greedy, int ndocs, int threads, std::string* json) {
  engine::ModelOptions mo;
  mo.device = device;
  mo.num_threads = threads;
  mo.kv_pool_bytes = 256ull << 20;
  auto model = engine::Model::load(model_dir, mo);
  if (!model.ok()) {
    std::fprintf(stderr, "model: %s\n", model.status().to_string().c_str());
    return 1;
  }
  auto tok = engine::Tokenizer::from_file(model_dir + "/tokenizer.json");
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  PromptBuilder builder(**tok, (*model)->config());
  const PipelineSpec spec = default_pipeline_spec();
  std::map<std::string, size_t> by_id;
  std::vector<std::string_view> texts;
  for (size_t i = 0; i < corpus.size(); ++i) by_id[corpus[i].id] = i, texts.push_back(corpus[i].text);
  std::mt19937 rng(2026);
  std::vector<BlendCase> set;
  for (int c = 0; c < cases && c < static_cast<int>(qs.size()); ++c) {
    const Question& q = qs[(c * 7919) % qs.size()];
    PromptSegments p = bench::gold_among_others(builder, spec, **tok, texts, by_id.at(q.gold), q.question, ndocs, rng);
    BlendCase bc;
    bc.head = p.segs.front();
    bc.tail = p.segs.back();
    bc.docs.assign(p.segs.begin() + 1, p.segs.end() - 1);
    set.push_back(std::move(bc));
  }
  const auto& cfg = (*model)->config();
  std::printf("## Fidelity vs full prefill: %s (%d layers, hidden %d), %zu prompts of %d passages, greedy %d tokens\n\n",
              model_dir.c_str(), cfg.num_hidden_layers, cfg.hidden_size, set.size(), ndocs, greedy);
  std::printf("| mode | max abs dlogit | first-token KL | first token same | greedy agreement (%d tokens) |\n|---|---|---|---|---|\n",
              greedy);
  std::vector<Mode> modes;
  auto cb = [](double r) {
    BlendParams p;
    p.recompute_ratio = r;
    return p;
  };
  auto ep = [](int k) {
    BlendParams p;
    p.epic_k = k;
    return p;
  };
  modes.push_back({"naive concatenation (r = 0)", ReuseMode::kCacheBlend, cb(0.0)});
  for (double r : {0.05, 0.15, 0.30}) modes.push_back({"cacheblend r = " + std::to_string(int(r * 100 + 0.5)) + "%", ReuseMode::kCacheBlend, cb(r)});
  for (int k : {4, 16, 32}) modes.push_back({"epic k = " + std::to_string(k), ReuseMode::kEpic, ep(k)});
  *json += "\"fidelity\":{\"model\":\"" + model_dir + "\",\"prompts\":" + std::to_string(set.size()) + ",\"modes\":{";
  bool first = true;
  for (const Mode& m : modes) {
    auto f = measure_fidelity(**model, set, m.mode, m.params, greedy);
    if (!f.ok()) {
      std::fprintf(stderr, "%s: %s\n", m.label.c_str(), f.status().to_string().c_str());
      return 1;
    }
    std::printf("| %s | %.3f | %.4f | %.0f%% | %.0f%% |\n", m.label.c_str(), f->max_abs_logit, f->first_token_kl,
                100 * f->first_token_match, 100 * f->greedy_agreement);
    *json += std::string(first ? "" : ",") + "\"" + m.label + "\":{\"max_abs_logit\":" + std::to_string(f->max_abs_logit) +
             ",\"first_token_kl\":" + std::to_string(f->first_token_kl) + ",\"first_token_match\":" +
             std::to_string(f->first_token_match) + ",\"greedy_agreement\":" + std::to_string(f->greedy_agreement) + "}";
    first = false;
  }
  *json += "}}";
  return 0;
}

std::string fmt_row(const char* name, std::initializer_list<double> v) {
  std::string s = std::string("| ") + name;
  for (double x : v) {
    char b[32];
    std::snprintf(b, sizeof b, " | %.1f", x);
    s += b;
  }
  return s + " |\n";
}

// Tokens generated per measured request (--max-tokens); 1 leaves only the TTFT work in a profile.
int max_tokens = 4;

int ttft(const std::string& model_dir, const std::string& device, const std::vector<Passage>& corpus, int requests,
         int warmup, int ndocs, double zipf, int threads, bool blend_check, bool seen, bool compare, int clients,
         const std::string& modes_arg, engine::WeightFormat weights,
         const std::string& out_dir, std::string* json) {
  const std::string data = out_dir + "/data", pipes = out_dir + "/pipelines";
  fs::remove_all(out_dir);
  fs::create_directories(pipes);
  const char* kModes[] = {"none", "prefix", "knowledge_tree", "cacheblend", "epic", "auto"};
  // Modes to measure: the pipelines above (all but auto by default), "X@admission" = mode X with the repair as a step of its
  // own at admission (the earlier path, --compare).
  std::vector<std::string> measure;
  if (!modes_arg.empty()) {
    for (size_t b = 0; b <= modes_arg.size();) {
      const size_t e = std::min(modes_arg.find(',', b), modes_arg.size());
      if (e > b) measure.push_back(modes_arg.substr(b, e - b));
      b = e + 1;
    }
  } else {
    measure.assign(std::begin(kModes), std::end(kModes) - 1);
  }
  if (compare) measure.insert(measure.end(), {"cacheblend@admission", "epic@admission"});
  for (const char* m : kModes)
    std::ofstream(fs::path(pipes) / (std::string(m) + ".toml"))
        << "[pipeline]\nname = \"" << m << "\"\n[retriever]\ntop_k = " << ndocs << "\n[reuse]\nmode = \"" << m
        << "\"\nrecompute_ratio = 0.15\nepic_k = 16\n";
  RuntimeOptions base;
  base.model_dir = model_dir;
  base.model.device = device;
  base.data_dir = data;
  base.pipelines_dir = pipes;
  base.model.num_threads = threads;
  base.retrieval_threads = 1;
  base.model.kv_pool_bytes = 256ull << 20;
  base.embedder_dim = 16384;  // few hash collisions between place names
  base.blend_check.enabled = blend_check;
  base.model.weights = weights;
  {
    auto rt = open_runtime(base);
    if (!rt.ok()) {
      std::fprintf(stderr, "open_runtime: %s\n", rt.status().to_string().c_str());
      return 1;
    }
    std::vector<DocumentInput> docs;
    for (const auto& p : corpus) docs.push_back({p.id, p.title, p.text});
    auto s = rt->documents->ingest(docs);
    if (!s.ok()) {
      std::fprintf(stderr, "ingest: %s\n", s.status().to_string().c_str());
      return 1;
    }
    rt->stop();
  }
  // Zipf over passages (a random popularity order), `ndocs` distinct per request. Only passages
  // with a one-word place are drawn: a shared word ("Bay", "Point") would pull other passages in.
  std::mt19937 rng(11);
  std::vector<size_t> rank;
  for (size_t i = 0; i < corpus.size(); ++i)
    if (corpus[i].place.find(' ') == std::string::npos) rank.push_back(i);
  std::shuffle(rank.begin(), rank.end(), rng);
  std::vector<double> w(rank.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0 / std::pow(i + 1, zipf);
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  std::vector<std::string> queries;
  std::vector<std::set<std::string>> drawn;
  for (int r = 0; r < warmup + requests; ++r) {
    std::vector<size_t> set;
    while (static_cast<int>(set.size()) < ndocs) {
      const size_t d = rank[pick(rng)];
      if (std::find(set.begin(), set.end(), d) == set.end()) set.push_back(d);
    }
    std::string q;
    std::set<std::string> ids;
    for (size_t d : set) {
      q += (q.empty() ? "" : ", ") + corpus[d].place;
      ids.insert(corpus[d].id);
    }
    queries.push_back(q);
    drawn.push_back(std::move(ids));
  }
  if (seen) {
    // Every passage of the measured requests is seen before, in other combinations: before the
    // warm-up draws, each of them once, shuffled into sets of `ndocs`.
    std::set<size_t> need;
    for (int r = warmup; r < warmup + requests; ++r)
      for (size_t i = 0; i < corpus.size(); ++i)
        if (drawn[r].count(corpus[i].id)) need.insert(i);
    std::vector<size_t> order(need.begin(), need.end());
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::string> pre;
    std::vector<std::set<std::string>> pre_ids;
    for (size_t b = 0; b < order.size(); b += ndocs) {
      std::string q;
      std::set<std::string> ids;
      for (size_t k = b; k < std::min(order.size(), b + static_cast<size_t>(ndocs)); ++k) {
        q += (q.empty() ? "" : ", ") + corpus[order[k]].place;
        ids.insert(corpus[order[k]].id);
      }
      pre.push_back(q);
      pre_ids.push_back(std::move(ids));
    }
    queries.insert(queries.begin(), pre.begin(), pre.end());
    drawn.insert(drawn.begin(), pre_ids.begin(), pre_ids.end());
    warmup += static_cast<int>(pre.size());
  }
  std::printf("## TTFT: %d requests after %d warm-up requests, %d passages each, Zipf(%.2f) over %zu of %zu passages, model %s, "
              "reuse self-check %s\n\n",
              requests, warmup, ndocs, zipf, rank.size(), corpus.size(), model_dir.c_str(), blend_check ? "on" : "off");
  std::printf("%d client(s), closed loop.\n\n"
              "| reuse | TTFT p50 ms | TTFT p99 ms | p50 speed-up vs none | prompt tokens (mean) | prompt tokens reused | approximate runs | set hit | requests/s |\n"
              "|---|---|---|---|---|---|---|---|---|\n",
              std::max(1, clients));
  *json += "\"ttft\":{\"model\":\"" + model_dir + "\",\"requests\":" + std::to_string(requests) + ",\"modes\":{";
  double none_p50 = 0;
  std::string split;  // the time split table, printed after the TTFT table
  for (const std::string& mode_name : measure) {
    const char* m = mode_name.c_str();
    const size_t at = mode_name.find('@');
    const std::string pipeline = mode_name.substr(0, at);
    fs::remove_all(fs::path(data) / "kvcache");
    RuntimeOptions ro = base;
    ro.test_hooks.blend_repair_at_admission = at != std::string::npos;
    auto rt = open_runtime(ro);
    if (!rt.ok()) return 1;
    std::vector<double> t;
    long prompt = 0, reused = 0, hits = 0, wanted = 0;
    int approx = 0;
    // Mean time split of the measured requests (ms): retrieval, lookup, admission (of which chunk
    // compute, placing, repair), prefill steps, TTFT.
    double s_ret = 0, s_lookup = 0, s_admit = 0, s_chunk = 0, s_place = 0, s_repair = 0, s_prefill = 0, s_ttft = 0;
    // Warm-up one at a time; the measured requests from `clients` closed-loop clients (1: in order).
    auto ask = [&](size_t i) {
      RunRequest rr;
      rr.pipeline = pipeline;
      rr.query = queries[i];
      rr.sampling.max_tokens = max_tokens;
      rr.sampling.temperature = 0.0f;
      rr.sampling.ignore_eos = true;
      return bench::run_and_wait(*rt->executor, std::move(rr));
    };
    std::vector<bench::Observed> obs(queries.size());
    for (size_t i = 0; i < static_cast<size_t>(warmup) && i < queries.size(); ++i)
      if (!(obs[i] = ask(i)).ok) return 1;
    // RAGD_BENCH_PERF_CTL=FIFO: `perf record --control=fifo:FIFO -D -1 ...` profiles the measured
    // requests only (the passages shown first and the warm-up dwarf them otherwise).
    if (const char* ctl = std::getenv("RAGD_BENCH_PERF_CTL")) std::ofstream(ctl) << "enable\n";
    const auto t_measure = std::chrono::steady_clock::now();
    {
      std::atomic<size_t> next{static_cast<size_t>(warmup)};
      std::vector<std::thread> workers;
      for (int c = 0; c < std::max(1, clients); ++c)
        workers.emplace_back([&] {
          for (size_t i; (i = next.fetch_add(1)) < queries.size();) obs[i] = ask(i);
        });
      for (auto& w : workers) w.join();
    }
    const double window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_measure).count();
    if (const char* ctl = std::getenv("RAGD_BENCH_PERF_CTL")) std::ofstream(ctl) << "disable\n";
    for (size_t i = static_cast<size_t>(warmup); i < queries.size(); ++i) {
      const bench::Observed& o = obs[i];
      if (!o.ok) return 1;
      t.push_back(o.ttft_ms);
      const Timings& tm = o.timings;
      s_ret += tm.retrieval_ms, s_lookup += tm.lookup_ms, s_admit += tm.admit_ms, s_chunk += tm.blend_chunk_ms;
      s_place += tm.blend_place_ms, s_repair += tm.blend_repair_ms, s_prefill += tm.prefill_ms, s_ttft += o.ttft_ms;
      prompt += o.usage.prompt_tokens;
      reused += o.usage.reused_tokens();
      approx += o.usage.approximate;
      std::set<std::string> got_ids;
      for (const auto& src : o.sources) got_ids.insert(src.doc_id);
      for (const auto& id : drawn[i]) hits += got_ids.count(id);
      if (getenv("RAGD_BENCH_VERBOSE")) {
        std::string got;
        for (const auto& id : got_ids) got += id + " ";
        std::fprintf(stderr, "%s -> %s| ttft %.1f prefill %.1f admit %.1f place %.1f chunk %.1f repair %.1f, "
                     "placed %d repaired %d recomputed %d\n",
                     queries[i].c_str(), got.c_str(), o.ttft_ms, tm.prefill_ms, tm.admit_ms, tm.blend_place_ms,
                     tm.blend_chunk_ms, tm.blend_repair_ms, o.usage.blended_tokens, o.usage.repaired_tokens,
                     o.usage.recomputed_tokens);
      }
      wanted += static_cast<long>(drawn[i].size());
    }
    rt->stop();
    const double nreq = std::max<size_t>(1, t.size());
    split += fmt_row(m, {s_ret / nreq, s_lookup / nreq, s_admit / nreq, s_chunk / nreq, s_place / nreq, s_repair / nreq,
                         s_prefill / nreq, (s_ttft - s_ret - s_lookup - s_admit - s_prefill) / nreq, s_ttft / nreq});
    const double p50 = bench::percentile(t, 50), p99 = bench::percentile(t, 99);
    if (std::string(m) == "none") none_p50 = p50;
    std::printf("| %s | %.2f | %.2f | %.2fx | %.0f | %.0f%% | %d / %d | %.0f%% | %.2f |\n", m, p50, p99, none_p50 / p50,
                static_cast<double>(prompt) / nreq, prompt ? 100.0 * reused / prompt : 0.0, approx, requests, wanted ? 100.0 * hits / wanted : 0.0,
                requests / std::max(1e-9, window_s));
    *json += std::string(std::string(m) == "none" ? "" : ",") + "\"" + m + "\":{\"ttft_p50_ms\":" + std::to_string(p50) +
             ",\"ttft_p99_ms\":" + std::to_string(p99) + ",\"reused_fraction\":" +
             std::to_string(prompt ? double(reused) / prompt : 0.0) + ",\"approximate_runs\":" + std::to_string(approx) + "}";
  }
  *json += "}}";
  std::printf("\n");
  std::printf("\nMean time split of a request (ms; admission = install of reused KV incl. chunk compute, placing "
              "and the repair step; prefill = the scheduler's prefill steps; other = queueing, sampling, events):\n\n"
              "| reuse | retrieval | lookup | admission | (chunk compute) | (place) | (repair) | prefill | other | TTFT mean |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n%s\n",
              split.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string model, corpus_path = "examples/qa_eval/corpus.jsonl", qpath = "examples/qa_eval/questions.jsonl";
  std::string section = "both", device = "cpu", json_path, out_dir = (fs::temp_directory_path() / "ragd_bench_blend").string();
  int cases = 24, greedy = 32, requests = 60, warmup = 0, ndocs = 4, threads = 0;
  bool blend_check = true, seen = false, compare = false;
  int clients = 1;
  int doc_repeat = 1;  // each passage's text this many times: longer documents (the QA passages are ~120 tokens)
  engine::WeightFormat weights = engine::WeightFormat::kAuto;
  std::string modes;
  double zipf = 0.9;
  ragd::bench::BenchArgs args("bench_blend");
  // --no-blend-check: random weights fail the self-check, so measure the approximate path anyway.
  // --seen: every measured passage seen before, in other combinations.
  // --compare: also the earlier path (chunk step + repair step at admission).
  args.flag("no-blend-check", &blend_check, false).flag("seen", &seen).flag("compare", &compare);
  args.opt("model", &model).opt("corpus", &corpus_path).opt("questions", &qpath).opt("section", &section);
  args.opt("modes", &modes).opt("clients", &clients).opt("max-tokens", &max_tokens).opt("doc-repeat", &doc_repeat);
  args.custom("weights", "auto", [&weights](const std::string& v) {
    auto w = parse_enum<engine::WeightFormat>(v, "--weights");
    if (!w.ok()) return w.status().to_string();
    weights = *w;
    return std::string();
  });
  args.opt("cases", &cases).opt("greedy", &greedy).opt("requests", &requests).opt("warmup", &warmup);
  args.opt("docs", &ndocs).opt("zipf", &zipf).opt("threads", &threads).opt("device", &device).opt("out", &out_dir);
  args.opt("json", &json_path);
  if (!args.parse(argc, argv)) return 2;
  if (model.empty() || (section != "fidelity" && section != "ttft" && section != "both")) {
    std::fprintf(stderr, "usage: bench_blend --model DIR [--section fidelity|ttft|both] ...\n");
    return 2;
  }
  simdjson::dom::parser parser;
  std::vector<Passage> corpus;
  for (const auto& l : read_lines(corpus_path)) {
    simdjson::dom::element e;
    if (parser.parse(l).get(e)) continue;
    Passage p;
    p.id = std::string(e["id"].get_string().value_unsafe());
    p.title = std::string(e["title"].get_string().value_unsafe());
    p.text = std::string(e["text"].get_string().value_unsafe());
    const std::string once = p.text;
    for (int r = 1; r < doc_repeat; ++r) p.text += " " + once;
    p.place = place_of(p.title);
    corpus.push_back(std::move(p));
  }
  std::vector<Question> qs;
  for (const auto& l : read_lines(qpath)) {
    simdjson::dom::element e;
    if (parser.parse(l).get(e)) continue;
    qs.push_back({std::string(e["question"].get_string().value_unsafe()), std::string(e["gold"].get_string().value_unsafe())});
  }
  if (corpus.size() < static_cast<size_t>(ndocs) || qs.empty()) {
    std::fprintf(stderr, "need a corpus of at least %d passages and questions (%s, %s)\n", ndocs, corpus_path.c_str(), qpath.c_str());
    return 2;
  }
  std::string json = "{";
  if (section != "ttft" && fidelity(model, device, corpus, qs, cases, greedy, ndocs, threads, &json) != 0) return 1;
  if (section == "both") json += ",";
  if (section != "fidelity" && ttft(model, device, corpus, requests, warmup, ndocs, zipf, threads, blend_check, seen, compare, clients, modes, weights, out_dir, &json) != 0) return 1;
  json += "}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

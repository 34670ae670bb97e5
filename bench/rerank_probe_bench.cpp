// bench_rerank_probe: can one tenant learn another tenant's private text, or what others asked
// about, from the timing of the reranking pipeline? (The reranker keeps the KV of the one-passage
// prompt heads it scored: a passage scored again skips its prefill.)
//
// The bench ingests the QA corpus (shared documents) with `ragctl ingest`, starts the real bin/ragd
// on a free loopback port with tenant keys key-a / key-b and an admin key, and runs two probes on
// the rerank pipeline (configs/pipelines/qa-rerank.toml). Every trial uses fresh text (random
// pseudo-words), so no earlier trial can have warmed a cache for it.
//
// Probe 1, a guess of a private document (--trials, half of them exact guesses, shuffled):
//   tenant A uploads a private document and runs the pipeline with a question about it; tenant B
//   uploads a GUESS of A's text as its own document (the exact text, or fresh words of the same
//   count) and runs the pipeline twice with a question that retrieves it, recording each run's
//   timings.retrieval_ms (the search plus the rerank), the server's timings.ttft_ms and its own
//   client-side TTFT. Both documents are deleted after the trial.
//   A classifier says "exact guess" when B's first-run retrieval_ms lies on the exact side of a
//   threshold at the midpoint between the two classes' medians; fitted on the even trials, tested
//   on the odd ones; also leave-one-out over all trials. Accuracy with a 95 % Clopper-Pearson
//   interval. 50 % is chance; an interval above 50 % is a leak.
// Probe 2, a shared passage others reranked (--shared-trials, half hot, shuffled):
//   an admin uploads a fresh shared passage, tenant A runs the pipeline with a question about it;
//   in a "cold" trial a second fresh shared passage is uploaded that nobody asked about. Tenant B
//   runs the pipeline once with a question about the hot (asked-about) or the cold passage; its
//   first-run timings are classified the same way.
// B's runs use top_k --b-top-k (default 1: the attacker retrieves only its target, so corpus
// passages scored for the first time do not add noise; 0 = the pipeline's top_k). A's runs use
// the pipeline's. Prints a table per probe; --json PATH writes every trial.
//
//   bench_rerank_probe [--trials 40] [--shared-trials 40] [--doc-words 50] [--b-top-k 1]
//                      [--config section.key=value]... [--pipeline qa-rerank] [--pipelines configs/pipelines]
//                      [--model models/ragd-qa] [--corpus examples/qa_eval/corpus.jsonl]
//                      [--seed 1] [--bin DIR] [--work DIR] [--keep] [--json PATH]
// Run it from the repository root (default paths are relative to it).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "bench_args.h"
#include "bench_daemon.h"

using namespace ragd;
using namespace ragd::bench;
using Clock = std::chrono::steady_clock;

namespace {

struct Opts {
  int trials = 40, shared_trials = 40, doc_words = 50, b_top_k = 1;
  std::vector<std::string> config;
  std::string pipeline = "qa-rerank";
  std::string pipelines = "configs/pipelines";
  std::string model = "models/ragd-qa";
  std::string corpus = "examples/qa_eval/corpus.jsonl";
  uint32_t seed = 1;
  std::string bin, work, json;
  bool keep = false;
};

const std::string kKeyA = "key-a", kKeyB = "key-b", kKeyAdmin = "key-admin";

// Fresh text: pseudo-words of 2-3 syllables, in sentences of 10 words.
class Words {
 public:
  explicit Words(uint32_t seed) : rng_(seed) {}
  std::string word() {
    static const char* on[] = {"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "gl"};
    static const char* nu[] = {"a", "e", "i", "o", "u", "ai", "ou", "ea"};
    static const char* co[] = {"", "", "n", "r", "s", "l", "m"};
    std::string w;
    const int syl = 2 + static_cast<int>(rng_() % 2);
    for (int s = 0; s < syl; ++s) {
      w += on[rng_() % std::size(on)];
      w += nu[rng_() % std::size(nu)];
    }
    w += co[rng_() % std::size(co)];
    return w;
  }
  std::vector<std::string> words(int n) {
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i) v.push_back(word());
    return v;
  }
  size_t pick(size_t n) { return rng_() % n; }
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

std::string text_of(const std::vector<std::string>& w) {
  std::string t;
  for (size_t i = 0; i < w.size(); ++i) {
    std::string x = w[i];
    if (i % 10 == 0) x[0] = static_cast<char>(std::toupper(x[0]));
    t += x;
    t += (i % 10 == 9 || i + 1 == w.size()) ? ". " : " ";
  }
  if (!t.empty()) t.pop_back();
  return t;
}

// A question whose words are a run of the document's (unigrams and bigrams of the hashing
// embedder match): its search finds that document first.
std::string question_about(const std::vector<std::string>& w, Words& g) {
  constexpr size_t kRun = 6;
  const size_t at = g.pick(w.size() - kRun + 1);
  std::string q = "What about";
  for (size_t i = at; i < at + kRun; ++i) q += " " + w[i];
  return q + "?";
}

struct Observed {
  bool ok = false;
  int status = 0;
  double client_ttft_ms = -1;
  double retrieval_ms = -1, ttft_ms = -1;
  std::string source;  // doc_id of the first source
  std::string error;
};

// One streamed run (SSE): client-side TTFT, the done event's timings, the first source.
Observed stream_run(uint16_t port, const std::string& key, const std::string& pipeline, const std::string& query,
                    int top_k) {
  Observed o;
  std::string body = "{\"query\":" + json_quote(query) + ",\"max_tokens\":4,\"temperature\":0,\"stream\":true";
  if (top_k > 0) body += ",\"top_k\":" + std::to_string(top_k);
  body += "}";
  daemon::HttpClient c("127.0.0.1", port, 120000);
  const auto t0 = Clock::now();
  daemon::SseParser sse([&](const std::string& ev, const std::string& data) {
    if (ev == "token" && o.client_ttft_ms < 0)
      o.client_ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (ev == "sources" && o.source.empty()) o.source = json_string(data, "/sources/0/doc_id").value_or("");
    if (ev == "done") {
      o.ok = true;
      o.retrieval_ms = json_number(data, "/timings/retrieval_ms").value_or(-1);
      o.ttft_ms = json_number(data, "/timings/ttft_ms").value_or(-1);
    }
    if (ev == "error") o.error = data;
  });
  auto r = c.request_stream("POST", "/v1/pipelines/" + pipeline + "/runs", body, bearer(key), [&](std::string_view d) {
    sse.feed(d);
    return true;
  });
  if (!r.ok()) {
    o.ok = false;
    o.error = r.status().to_string();
  } else {
    o.status = r->status;
    if (r->status != 200) {
      o.ok = false;
      o.error = r->body.substr(0, 300);
    }
  }
  return o;
}

bool call(uint16_t port, const std::string& key, const std::string& method, const std::string& target,
          const std::string& body = "") {
  daemon::HttpClient c("127.0.0.1", port, 60000);
  auto r = c.request(method, target, body, bearer(key));
  if (!r.ok() || r->status != 200) {
    std::fprintf(stderr, "bench_rerank_probe: %s %s: %s\n", method.c_str(), target.c_str(),
                 r.ok() ? r->body.substr(0, 300).c_str() : r.status().to_string().c_str());
    return false;
  }
  return true;
}

bool upload(uint16_t port, const std::string& key, const std::string& id, const std::string& text) {
  return call(port, key, "POST", "/v1/documents", "{\"id\":" + json_quote(id) + ",\"text\":" + json_quote(text) + "}");
}

// ---- statistics ---------------------------------------------------------------------------------

double median(std::vector<double> v) { return pct(std::move(v), 50); }

// P(X <= k) for X ~ Binomial(n, p).
double binom_cdf(int k, int n, double p) {
  if (k < 0) return 0;
  if (k >= n) return 1;
  double s = 0;
  for (int i = 0; i <= k; ++i)
    s += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) + i * std::log(p) +
                  (n - i) * std::log1p(-p));
  return std::min(1.0, s);
}

// 95 % Clopper-Pearson interval of k successes in n trials.
std::pair<double, double> clopper_pearson(int k, int n) {
  if (n == 0) return {0, 1};
  auto solve = [](const std::function<double(double)>& f) {  // f increasing in p, root of f(p) = 0
    double lo = 0, hi = 1;
    for (int i = 0; i < 100; ++i) {
      const double mid = (lo + hi) / 2;
      (f(mid) < 0 ? lo : hi) = mid;
    }
    return (lo + hi) / 2;
  };
  // lower: P(X >= k | p) = 0.025; upper: P(X <= k | p) = 0.025.
  const double lower = k == 0 ? 0 : solve([&](double p) { return (1 - binom_cdf(k - 1, n, p)) - 0.025; });
  const double upper = k == n ? 1 : solve([&](double p) { return 0.025 - binom_cdf(k, n, p); });
  return {lower, upper};
}

struct Sample {
  bool positive;  // exact guess / hot passage
  double x;       // the feature
};

// Threshold at the midpoint of the two classes' medians; `low_is_positive` says which side is
// the positive class. False when a class is empty.
struct Rule {
  double threshold = 0;
  bool low_is_positive = true;
  bool ok = false;
  bool positive(double x) const { return low_is_positive ? x < threshold : x > threshold; }
};
Rule fit(const std::vector<Sample>& s) {
  std::vector<double> pos, neg;
  for (const auto& e : s) (e.positive ? pos : neg).push_back(e.x);
  Rule r;
  if (pos.empty() || neg.empty()) return r;
  const double mp = median(pos), mn = median(neg);
  r.threshold = (mp + mn) / 2;
  r.low_is_positive = mp <= mn;
  r.ok = true;
  return r;
}

struct Accuracy {
  int correct = 0, n = 0;
  double lo = 0, hi = 0;
  std::string json() const {
    return "{\"correct\":" + std::to_string(correct) + ",\"n\":" + std::to_string(n) +
           ",\"accuracy\":" + jnum(n ? static_cast<double>(correct) / n : std::nan("")) + ",\"ci95\":[" + jnum(lo) + "," +
           jnum(hi) + "]}";
  }
  std::string text() const {
    char b[128];
    std::snprintf(b, sizeof b, "%2d/%-2d = %5.1f %% (95 %% CI %5.1f-%5.1f %%)", correct, n,
                  n ? 100.0 * correct / n : 0.0, 100 * lo, 100 * hi);
    return b;
  }
};
Accuracy finish(int correct, int n) {
  Accuracy a{correct, n};
  std::tie(a.lo, a.hi) = clopper_pearson(correct, n);
  return a;
}

// Fit on the even trials, test on the odd ones.
Accuracy split_half(const std::vector<Sample>& s, Rule* rule_out) {
  std::vector<Sample> train, test;
  for (size_t i = 0; i < s.size(); ++i) (i % 2 == 0 ? train : test).push_back(s[i]);
  const Rule r = fit(train);
  *rule_out = r;
  int c = 0;
  for (const auto& e : test) c += r.ok && r.positive(e.x) == e.positive;
  return finish(c, static_cast<int>(test.size()));
}

Accuracy leave_one_out(const std::vector<Sample>& s) {
  int c = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    std::vector<Sample> rest = s;
    rest.erase(rest.begin() + static_cast<long>(i));
    const Rule r = fit(rest);
    c += r.ok && r.positive(s[i].x) == s[i].positive;
  }
  return finish(c, static_cast<int>(s.size()));
}

struct Feature {
  std::string name;
  std::vector<Sample> samples;
};

// Prints and returns the JSON of every feature's classification.
std::string classify(const std::string& what, const std::string& pos_name, const std::string& neg_name,
                     const std::vector<Feature>& features) {
  std::string j = "{";
  std::printf("  %-34s %9s %9s   %-40s %s\n", what.c_str(), ("med " + pos_name).c_str(), ("med " + neg_name).c_str(),
              "split half (fit even, test odd)", "leave-one-out");
  for (size_t f = 0; f < features.size(); ++f) {
    const auto& ft = features[f];
    std::vector<double> pos, neg;
    for (const auto& e : ft.samples) (e.positive ? pos : neg).push_back(e.x);
    Rule rule;
    const Accuracy half = split_half(ft.samples, &rule);
    const Accuracy loo = leave_one_out(ft.samples);
    std::printf("  %-34s %9.2f %9.2f   %-40s %s\n", ft.name.c_str(), median(pos), median(neg), half.text().c_str(),
                loo.text().c_str());
    j += (f ? "," : "") + json_quote(ft.name) + ":{\"median_" + pos_name + "\":" + jnum(median(pos)) + ",\"median_" +
         neg_name + "\":" + jnum(median(neg)) + ",\"threshold\":" + jnum(rule.threshold) +
         ",\"split_half\":" + half.json() + ",\"leave_one_out\":" + loo.json() + "}";
  }
  return j + "}";
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  BenchArgs cli("bench_rerank_probe");
  cli.flag("keep", &o.keep).opt("trials", &o.trials).opt("shared-trials", &o.shared_trials).opt("doc-words", &o.doc_words);
  cli.opt("b-top-k", &o.b_top_k).each("config", &o.config).opt("pipeline", &o.pipeline).opt("pipelines", &o.pipelines);
  cli.opt("model", &o.model).opt("corpus", &o.corpus).opt("seed", &o.seed).opt("bin", &o.bin).opt("work", &o.work);
  cli.opt("json", &o.json);
  if (!cli.parse(argc, argv)) return 2;
  if (o.trials < 4 || o.shared_trials < 0 || o.doc_words < 8) {
    std::fprintf(stderr, "bench_rerank_probe: need --trials >= 4, --doc-words >= 8\n");
    return 2;
  }
  if (o.bin.empty()) o.bin = exe_dir();
  const std::string commit = git_commit();
  const bool own_work = o.work.empty();
  if (own_work) {
    char tmpl[] = "/tmp/ragd_rerank_probe_XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    o.work = tmpl;
  }
  fs::create_directories(o.work);
  const std::string data = o.work + "/data";
  std::printf("bench_rerank_probe: commit %s, model %s, pipeline %s, work dir %s\n", commit.c_str(), o.model.c_str(),
              o.pipeline.c_str(), o.work.c_str());
  if (run_program({o.bin + "/ragctl", "ingest", o.corpus, "--data", data, "--model", o.model}, o.work + "/ingest.log") != 0) {
    std::fprintf(stderr, "bench_rerank_probe: ragctl ingest failed (log %s/ingest.log)\n", o.work.c_str());
    return 1;
  }
  std::vector<std::string> args = {o.bin + "/ragd", "--model", o.model, "--data", data, "--listen", "127.0.0.1:0",
                                   "--pipelines", o.pipelines, "--api-key", kKeyA + "=tenant-a", "--api-key",
                                   kKeyB + "=tenant-b", "--admin-key", kKeyAdmin + "=ops"};
  std::string cfg_text;
  for (const auto& c : o.config) {
    args.push_back("--set");
    args.push_back(c);
    cfg_text += (cfg_text.empty() ? "" : " ") + c;
  }
  RagdProcess d;
  std::string err;
  if (!d.start_ready(args, &err, o.work + "/ragd.log", kDaemonStartMs)) {
    std::fprintf(stderr, "bench_rerank_probe: %s\n", err.c_str());
    return 1;
  }
  const uint16_t port = d.port();
  Words g(o.seed);
  int failures = 0;

  // Warm-up: the code paths (not any trial's text) once, for both tenants.
  for (const std::string& key : {kKeyA, kKeyB}) {
    const std::vector<std::string> w = g.words(o.doc_words);
    if (!upload(port, key, "warmup", text_of(w))) return 1;
    for (int r = 0; r < 2; ++r) (void)stream_run(port, key, o.pipeline, question_about(w, g), key == kKeyB ? o.b_top_k : 0);
    (void)call(port, key, "DELETE", "/v1/documents/warmup");
  }

  // ---- probe 1: B guesses A's private document ---------------------------------------------------
  std::vector<bool> exact(static_cast<size_t>(o.trials));
  for (size_t i = 0; i < exact.size(); ++i) exact[i] = i < exact.size() / 2;
  std::shuffle(exact.begin(), exact.end(), g.rng());
  Feature f_ret1{"B run 1 retrieval_ms", {}}, f_ttft1{"B run 1 ttft_ms (server)", {}},
      f_cttft1{"B run 1 TTFT (client)", {}}, f_diff{"B run 1 - run 2 retrieval_ms", {}};
  std::string trials_json;
  int own_source = 0;
  std::printf("probe 1: %d trials (%d exact guesses), %d-word documents, B top_k %s\n", o.trials, o.trials / 2,
              o.doc_words, o.b_top_k > 0 ? std::to_string(o.b_top_k).c_str() : "(pipeline's)");
  for (int t = 0; t < o.trials; ++t) {
    const std::vector<std::string> wa = g.words(o.doc_words);
    const std::vector<std::string> wb = exact[static_cast<size_t>(t)] ? wa : g.words(o.doc_words);
    const std::string a_id = "a-note-" + std::to_string(t), b_id = "b-guess-" + std::to_string(t);
    if (!upload(port, kKeyA, a_id, text_of(wa))) return 1;
    const Observed a = stream_run(port, kKeyA, o.pipeline, question_about(wa, g), 0);
    if (!upload(port, kKeyB, b_id, text_of(wb))) return 1;
    const std::string qb = question_about(wb, g);
    const Observed b1 = stream_run(port, kKeyB, o.pipeline, qb, o.b_top_k);
    const Observed b2 = stream_run(port, kKeyB, o.pipeline, qb, o.b_top_k);
    (void)call(port, kKeyA, "DELETE", "/v1/documents/" + a_id);
    (void)call(port, kKeyB, "DELETE", "/v1/documents/" + b_id);
    if (!a.ok || !b1.ok || !b2.ok) {
      ++failures;
      std::fprintf(stderr, "bench_rerank_probe: trial %d: a run failed: %s %s %s\n", t, a.error.c_str(),
                   b1.error.c_str(), b2.error.c_str());
      continue;
    }
    own_source += b1.source == b_id;
    if (b1.source != b_id)
      std::fprintf(stderr, "bench_rerank_probe: trial %d: B's run put %s in its prompt, not its own %s\n", t,
                   b1.source.c_str(), b_id.c_str());
    const bool e = exact[static_cast<size_t>(t)];
    f_ret1.samples.push_back({e, b1.retrieval_ms});
    f_ttft1.samples.push_back({e, b1.ttft_ms});
    f_cttft1.samples.push_back({e, b1.client_ttft_ms});
    f_diff.samples.push_back({e, b1.retrieval_ms - b2.retrieval_ms});
    char line[512];
    std::snprintf(line, sizeof line,
                  "{\"trial\":%d,\"exact\":%s,\"a_retrieval_ms\":%s,\"b1\":{\"retrieval_ms\":%s,\"ttft_ms\":%s,"
                  "\"client_ttft_ms\":%s,\"source_is_own\":%s},\"b2\":{\"retrieval_ms\":%s,\"ttft_ms\":%s,\"client_ttft_ms\":%s}}",
                  t, e ? "true" : "false", jnum(a.retrieval_ms).c_str(), jnum(b1.retrieval_ms).c_str(),
                  jnum(b1.ttft_ms).c_str(), jnum(b1.client_ttft_ms).c_str(), b1.source == b_id ? "true" : "false",
                  jnum(b2.retrieval_ms).c_str(), jnum(b2.ttft_ms).c_str(), jnum(b2.client_ttft_ms).c_str());
    trials_json += (trials_json.empty() ? "" : ",") + std::string(line);
  }
  std::printf("  B's first run retrieved its own document in %d of %zu trials\n", own_source, f_ret1.samples.size());
  const std::string c1 = classify("feature", "exact", "wrong", {f_ret1, f_ttft1, f_cttft1, f_diff});

  // ---- probe 2: a shared passage someone reranked recently vs a cold one -------------------------
  std::string c2 = "null", shared_json;
  if (o.shared_trials >= 4) {
    std::vector<bool> hot(static_cast<size_t>(o.shared_trials));
    for (size_t i = 0; i < hot.size(); ++i) hot[i] = i < hot.size() / 2;
    std::shuffle(hot.begin(), hot.end(), g.rng());
    Feature s_ret{"B retrieval_ms", {}}, s_ttft{"B ttft_ms (server)", {}}, s_cttft{"B TTFT (client)", {}};
    int own = 0;
    std::printf("probe 2: %d trials (%d hot): B's first run on a shared passage A reranked just before vs a cold one\n",
                o.shared_trials, o.shared_trials / 2);
    for (int t = 0; t < o.shared_trials; ++t) {
      const bool h = hot[static_cast<size_t>(t)];
      const std::vector<std::string> wh = g.words(o.doc_words);
      const std::string hot_id = "shared-hot-" + std::to_string(t), cold_id = "shared-cold-" + std::to_string(t);
      if (!upload(port, kKeyAdmin, hot_id, text_of(wh))) return 1;
      const Observed a = stream_run(port, kKeyA, o.pipeline, question_about(wh, g), 0);
      std::vector<std::string> wc;
      if (!h) {
        wc = g.words(o.doc_words);
        if (!upload(port, kKeyAdmin, cold_id, text_of(wc))) return 1;
      }
      const Observed b = stream_run(port, kKeyB, o.pipeline, question_about(h ? wh : wc, g), o.b_top_k);
      (void)call(port, kKeyAdmin, "DELETE", "/v1/documents/" + hot_id);
      if (!h) (void)call(port, kKeyAdmin, "DELETE", "/v1/documents/" + cold_id);
      if (!a.ok || !b.ok) {
        ++failures;
        std::fprintf(stderr, "bench_rerank_probe: shared trial %d: a run failed: %s %s\n", t, a.error.c_str(),
                     b.error.c_str());
        continue;
      }
      own += b.source == (h ? hot_id : cold_id);
      s_ret.samples.push_back({h, b.retrieval_ms});
      s_ttft.samples.push_back({h, b.ttft_ms});
      s_cttft.samples.push_back({h, b.client_ttft_ms});
      char line[256];
      std::snprintf(line, sizeof line,
                    "{\"trial\":%d,\"hot\":%s,\"retrieval_ms\":%s,\"ttft_ms\":%s,\"client_ttft_ms\":%s,\"source_is_target\":%s}",
                    t, h ? "true" : "false", jnum(b.retrieval_ms).c_str(), jnum(b.ttft_ms).c_str(),
                    jnum(b.client_ttft_ms).c_str(), b.source == (h ? hot_id : cold_id) ? "true" : "false");
      shared_json += (shared_json.empty() ? "" : ",") + std::string(line);
    }
    std::printf("  B's run retrieved the target passage in %d of %zu trials\n", own, s_ret.samples.size());
    c2 = classify("feature", "hot", "cold", {s_ret, s_ttft, s_cttft});
  }
  d.stop();

  if (!o.json.empty()) {
    std::ofstream(o.json) << "{\"bench\":\"rerank_probe\",\"commit\":" << json_quote(commit) << ",\"config\":"
                          << json_quote(cfg_text) << ",\"pipeline\":" << json_quote(o.pipeline) << ",\"doc_words\":"
                          << o.doc_words << ",\"b_top_k\":" << o.b_top_k << ",\"seed\":" << o.seed
                          << ",\"guess\":{\"classification\":" << c1 << ",\"trials\":[" << trials_json
                          << "]},\"shared\":{\"classification\":" << c2 << ",\"trials\":[" << shared_json << "]}}\n";
    std::printf("bench_rerank_probe: wrote %s\n", o.json.c_str());
  }
  if (own_work && !o.keep) fs::remove_all(o.work);
  return failures == 0 ? 0 : 1;
}

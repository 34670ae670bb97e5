// Speculative decoding benchmark (n-gram drafts, ExecutorImpl::verify_draft): the same requests
// with drafts off and on, in one process, taking turns per request so that drift in machine load
// hits both alike; outputs are checked identical (token ids).
//
//   bench_speculative --mode qa --model models/ragd-qa [--questions N] [--k 8] [--max-tokens 48]
//       [--questions-file examples/qa_eval/questions.jsonl] [--budget-off]
//       RAG answers of a trained QA model over examples/qa_eval (the built-in "default" pipeline,
//       greedy, one request at a time): decode tok/s (tokens after the first over the time after
//       the first token), TTFT, acceptance rate, accepted tokens per verification step, answer
//       lengths. examples/qa_eval/quote_questions.jsonl is the copy-heavy workload (answers that
//       quote their passage whole; models/ragd-qa-quote answers them). --budget-off verifies every
//       proposed draft token (the step budget off), for comparison. --answer-ngrams N sets
//       runtime.speculative_answer_ngrams (0: drafts from each run's own prompt and output only;
//       otherwise also from the earlier answers, which build up over the questions).
//       [--method ngram,draft] [--ks 4,8] [--draft-model DIR] [--rounds R]: the draft sources
//       compared with drafts off, each at every k of --ks (default: --k), the questions taking
//       turns over all of them (first one rotating), R passes; method draft drafts with the draft
//       model in DIR (runtime.speculative_draft_model; e.g. models/ragd-draft). Per variant:
//       decode tok/s, acceptance, accepted tokens per step, outputs identical to drafts off, and the
//       speedup over drafts off in each round. Method draft drafts with the model only where its
//       gate (draft_budget.h, draft_model_pays) passes, from the n-gram lookup elsewhere;
//       --draft-alone drafts nothing there instead (the gate's own effect).
//       (The drafted / accepted columns count both sources of a variant.)
//   bench_speculative --mode batch --model DIR [--batches 1,4,16,64] [--k 8] [--max-tokens 64]
//       [--accept ngram,0,0.5,0.9,1]
//       Throughput (generated tokens / wall time) of B plain runs submitted at once, greedy with
//       ignore_eos, drafts off against drafts on under the step budget (draft_budget.h, the
//       default) and with every proposed draft token forced in (the budget off). Acceptance
//       patterns: "ngram" drafts from the prompt (random weights copy little); a number A forces
//       the pattern: each run drafts its own output (known from the off run) with every draft
//       token kept right with probability A (so the first wrong one ends the accepted prefix).
//   Common: [--threads N] [--reps 5] [--source-dir DIR] (examples/ is read from it; default: the
//   build's).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
#include <algorithm>

#include <unistd.h>

#include <simdjson.h>

#include "ragd/pipelines/runtime.h"
#include "bench_args.h"
#include "qa_corpus.h"
#include "run_client.h"

namespace fs = std::filesystem;
using namespace ragd;
using namespace ragd::pipelines;
using ragd::bench::Observed;
using ragd::bench::run_and_wait;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string mode = "qa", model, source_dir = RAGD_SOURCE_DIR, questions_file;
  int questions = 60, k = 8, max_tokens = 48, threads = 2, reps = 5;
  int answer_ngrams = SpeculativeOptions{}.answer_ngrams;  // 0: drafts from the prompt lookup only
  bool budget_off = false;
  bool draft_alone = false;  // method draft: no n-gram drafts where the draft-model gate says no
  // qa: the draft sources to compare with drafts off (ngram, draft), at each k of `ks` (empty: k),
  // for `rounds` passes over the questions; draft_model: the draft model of method draft.
  std::vector<std::string> methods = {"ngram"};
  std::vector<int> ks;
  int rounds = 1;
  std::string draft_model;
  std::vector<int> batches = {1, 4, 16, 64};
  std::vector<std::string> accept = {"ngram", "0", "0.5", "0.9", "1"};
};

Args parse(int argc, char** argv) {
  Args a;
  ragd::bench::BenchArgs args("bench_speculative");
  args.opt("mode", &a.mode).opt("model", &a.model).opt("source-dir", &a.source_dir).opt("questions", &a.questions);
  args.opt("k", &a.k).opt("max-tokens", &a.max_tokens).opt("threads", &a.threads).opt("reps", &a.reps);
  args.opt("questions-file", &a.questions_file).flag("budget-off", &a.budget_off).flag("draft-alone", &a.draft_alone).opt("answer-ngrams", &a.answer_ngrams);
  args.list("batches", &a.batches).list("accept", &a.accept);
  args.list("method", &a.methods).list("ks", &a.ks).opt("rounds", &a.rounds).opt("draft-model", &a.draft_model);
  if (!args.parse(argc, argv)) std::exit(2);
  if (a.model.empty()) {
    std::fprintf(stderr, "--model DIR is required\n");
    std::exit(2);
  }
  return a;
}

std::vector<std::pair<std::string, std::string>> read_jsonl(const std::string& path, const char* a, const char* b, size_t limit) {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in(path);
  simdjson::dom::parser p;
  for (std::string line; std::getline(in, line) && out.size() < limit;) {
    simdjson::dom::element e;
    if (p.parse(line).get(e)) continue;
    std::string_view x, y;
    if (e[a].get_string().get(x) || e[b].get_string().get(y)) continue;
    out.emplace_back(std::string(x), std::string(y));
  }
  return out;
}

Runtime open(const Args& a, const std::string& data, int spec_k, RuntimeTestHooks hooks = {}) {
  RuntimeOptions o;
  o.model_dir = a.model;
  o.data_dir = data;
  o.model.num_threads = a.threads;
  o.retrieval_threads = 1;
  o.speculative.k = spec_k;
  o.speculative.answer_ngrams = a.answer_ngrams;
  o.speculative.draft_model = a.draft_model;
  o.test_hooks = std::move(hooks);
  o.scheduler.max_running = 64;
  o.model.kv_pool_bytes = 1ull << 30;
  auto rt = open_runtime(o);
  if (!rt.ok()) {
    std::fprintf(stderr, "open_runtime: %s\n", rt.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(rt).value();
}

int qa(const Args& a) {
  const std::string data = (fs::temp_directory_path() / ("ragd_specbench_" + std::to_string(::getpid()))).string();
  fs::remove_all(data);
  RuntimeTestHooks hooks;
  hooks.draft_budget_off = a.budget_off;
  hooks.draft_model_alone = a.draft_alone;
  Runtime rt = open(a, data, 0, hooks);
  const std::vector<DocumentInput> docs = ragd::bench::read_qa_corpus(a.source_dir);
  auto ing = rt.documents->ingest(docs);
  if (!ing.ok()) {
    std::fprintf(stderr, "ingest: %s\n", ing.status().to_string().c_str());
    return 1;
  }
  const std::string qfile = a.questions_file.empty() ? a.source_dir + "/examples/qa_eval/questions.jsonl" : a.questions_file;
  const auto qs = read_jsonl(qfile, "question", "answer", static_cast<size_t>(a.questions));
  if (qs.empty()) {
    std::fprintf(stderr, "no questions in %s\n", qfile.c_str());
    return 1;
  }
  // The variants: drafts off (the baseline), then each method at each k.
  struct Variant {
    std::string name;
    DraftMethod method = DraftMethod::kNgram;
    int k = 0;
  };
  std::vector<Variant> vars = {{"off", DraftMethod::kNgram, 0}};
  const std::vector<int> ks = a.ks.empty() ? std::vector<int>{a.k} : a.ks;
  for (const std::string& m : a.methods) {
    auto method = parse_draft_method(m);
    if (!method.ok()) {
      std::fprintf(stderr, "--method: %s\n", method.status().to_string().c_str());
      return 2;
    }
    for (int k : ks) vars.push_back({m + " k" + std::to_string(k), *method, k});
  }
  struct Sum {
    double decode_ms = 0, ttft_ms = 0, e2e_ms = 0;
    long after_first = 0, tokens = 0, drafted = 0, accepted = 0, steps = 0, identical = 0, runs = 0;
    double tok_s() const { return 1000.0 * static_cast<double>(after_first) / std::max(1e-9, decode_ms); }
  };
  const size_t nv = vars.size();
  std::vector<Sum> total(nv);
  std::vector<std::vector<double>> round_speedup(nv);
  std::vector<int> lengths;
  long prompt_tokens = 0;
  for (int round = 0; round < std::max(1, a.rounds); ++round) {
    std::vector<Sum> sum(nv);
    for (size_t i = 0; i < qs.size(); ++i) {
      std::vector<std::vector<int32_t>> ids(nv);
      for (size_t t = 0; t < nv; ++t) {
        const size_t v = (i + t + static_cast<size_t>(round)) % nv;  // rotate which goes first
        RunRequest r;
        r.pipeline = "default";
        r.query = qs[i].first;
        r.sampling.max_tokens = a.max_tokens;
        r.sampling.temperature = 0.0f;
        r.reuse = ReuseMode::kNone;
        r.speculative_k = vars[v].k;
        if (vars[v].k > 0) r.speculative_method = vars[v].method;
        r.id = "q" + std::to_string(i) + "-" + std::to_string(v) + "-" + std::to_string(round);
        const Observed o = run_and_wait(*rt.executor, r);
        if (!o.ok) return 1;
        Sum& s = sum[v];
        s.ttft_ms += o.ttft_ms;
        s.e2e_ms += o.e2e_ms;
        s.decode_ms += o.e2e_ms - o.ttft_ms;
        s.after_first += std::max(0, o.tokens - 1);
        s.tokens += o.tokens;
        s.drafted += o.usage.drafted_tokens;
        s.accepted += o.usage.accepted_tokens;
        s.steps += o.usage.draft_steps;
        ++s.runs;
        ids[v] = o.token_ids;
        if (v == 0 && round == 0) lengths.push_back(o.tokens), prompt_tokens += o.usage.prompt_tokens;
      }
      for (size_t v = 0; v < nv; ++v) sum[v].identical += ids[v] == ids[0];
    }
    std::printf("# round %d:", round + 1);
    for (size_t v = 0; v < nv; ++v) {
      const double sp = sum[v].tok_s() / std::max(1e-12, sum[0].tok_s());
      round_speedup[v].push_back(sp);
      std::printf("  %s %.1f tok/s (%.2fx)", vars[v].name.c_str(), sum[v].tok_s(), sp);
      Sum& t = total[v];
      t.decode_ms += sum[v].decode_ms, t.ttft_ms += sum[v].ttft_ms, t.e2e_ms += sum[v].e2e_ms, t.after_first += sum[v].after_first;
      t.tokens += sum[v].tokens, t.drafted += sum[v].drafted, t.accepted += sum[v].accepted, t.steps += sum[v].steps;
      t.identical += sum[v].identical, t.runs += sum[v].runs;
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  std::sort(lengths.begin(), lengths.end());
  double mean_len = 0;
  for (int l : lengths) mean_len += l;
  mean_len /= std::max<size_t>(1, lengths.size());
  std::printf("# qa: %zu questions of %s, model %s, draft model %s, max_tokens %d, %d threads, answer n-grams %d, %d round(s)\n",
              qs.size(), qfile.c_str(), a.model.c_str(), a.draft_model.empty() ? "none" : a.draft_model.c_str(), a.max_tokens,
              a.threads, a.answer_ngrams, std::max(1, a.rounds));
  std::printf("# answer tokens: mean %.1f, median %d, max %d; prompt tokens: mean %.1f\n", mean_len,
              lengths.empty() ? 0 : lengths[lengths.size() / 2], lengths.empty() ? 0 : lengths.back(),
              static_cast<double>(prompt_tokens) / static_cast<double>(std::max<size_t>(1, lengths.size())));
  std::printf("%-10s %12s %8s %8s %9s %9s %9s %12s %9s %16s\n", "drafts", "decode tok/s", "TTFT ms", "e2e ms", "drafted",
              "accepted", "accept %", "accepted/step", "identical", "speedup by round");
  bool all_same = true;
  for (size_t v = 0; v < nv; ++v) {
    const Sum& s = total[v];
    std::string rounds;
    for (double x : round_speedup[v]) rounds += (rounds.empty() ? "" : " ") + std::to_string(x).substr(0, 4);
    std::printf("%-10s %12.1f %8.1f %8.1f %9ld %9ld %9.1f %12.2f %5ld/%-3ld %16s\n", vars[v].name.c_str(), s.tok_s(),
                s.ttft_ms / std::max(1L, s.runs), s.e2e_ms / std::max(1L, s.runs), s.drafted, s.accepted,
                100.0 * s.accepted / std::max(1L, s.drafted),
                s.steps ? double(s.accepted) / s.steps : 0.0, s.identical, s.runs, rounds.c_str());
    all_same = all_same && s.identical == s.runs;
  }
  const ExecutorStats st = rt.executor->stats();
  std::printf("# serving model's step (fitted): %.3f ms fixed + %.3f ms per row\n", st.spec_step_fixed_ms, st.spec_step_per_row_ms);
  if (st.spec_draft_models.steps > 0)
    std::printf("# draft model: %lu steps, %lu tokens fed, %.1f ms in all, %.3f ms per drafted token, %.4f ms per token fed "
                "in a prefill (last estimates); budget left out %lu draft-model tokens, %lu n-gram tokens\n",
                static_cast<unsigned long>(st.spec_draft_models.steps), static_cast<unsigned long>(st.spec_draft_models.fed_tokens),
                st.spec_draft_models.ms, st.spec_draft_models.ms_per_token, st.spec_draft_models.ms_per_fed_token,
                static_cast<unsigned long>(st.spec_draft.budget_skipped),
                static_cast<unsigned long>(st.spec_ngram.budget_skipped));
  std::printf("# by source: draft model %lu drafted, %lu accepted in %lu steps; n-gram lookup %lu drafted, %lu accepted in %lu "
              "steps; the draft-model gate turned the model down in %lu run-steps\n",
              static_cast<unsigned long>(st.spec_draft.drafted), static_cast<unsigned long>(st.spec_draft.accepted),
              static_cast<unsigned long>(st.spec_draft.steps), static_cast<unsigned long>(st.spec_ngram.drafted),
              static_cast<unsigned long>(st.spec_ngram.accepted), static_cast<unsigned long>(st.spec_ngram.steps),
              static_cast<unsigned long>(st.spec_draft.turned_down));
  rt.stop();  // closed before its directory goes
  rt.executor.reset();
  rt.documents.reset();
  fs::remove_all(data);
  return all_same ? 0 : 3;
}

// A forced acceptance pattern's drafts: run i's own output (from the off run) from its next token
// on, each token kept right with probability `accept` (a fixed hash of the run, position and
// round decides), a wrong one a neighbouring id.
std::vector<int32_t> forced_draft(const std::vector<int32_t>& ref, uint64_t run, int generated, int len, double accept, int rep) {
  std::vector<int32_t> d;
  for (int j = 0; j < len && static_cast<size_t>(generated + j) < ref.size(); ++j) {
    const int32_t t = ref[static_cast<size_t>(generated + j)];
    uint64_t h = run * 0x9E3779B97F4A7C15ull + (static_cast<uint64_t>(generated + j) << 20) + static_cast<uint64_t>(rep) + 1;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64's finaliser
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    const bool right = static_cast<double>(h >> 11) * 0x1.0p-53 < accept;
    d.push_back(right ? t : t > 0 ? t - 1 : t + 1);
  }
  return d;
}

int batch(const Args& a) {
  std::printf("# batch: model %s, k %d, max_tokens %d, %d threads; throughput = generated tokens / wall time, median of %d "
              "rounds (the modes take turns within a round); budget = the step budget (default), forced = every proposed "
              "draft token verified\n", a.model.c_str(), a.k, a.max_tokens, a.threads, a.reps);
  std::printf("%-6s %-8s %10s %10s %9s %10s %9s %10s %9s\n", "batch", "drafts", "off tok/s", "budget", "vs off", "forced", "vs off",
              "acc(bud)", "identical");
  const std::string passage = "The archive at Norwell lists the survey of 1874, the survey of 1902 and the survey of 1931; each survey "
                              "names the river, the mill and the bridge.";
  for (int b : a.batches) {
    const size_t np = a.accept.size();
    std::vector<double> off_tps;
    std::vector<std::vector<double>> tps(np * 2);
    std::vector<long> accepted(np * 2, 0);
    std::vector<bool> same(np * 2, true);
    for (int rep = 0; rep < a.reps; ++rep) {
      std::vector<std::vector<int32_t>> ref;
      // Round order: off first (its outputs script the forced patterns), then each pattern under
      // the budget and forced.
      for (size_t m = 0; m <= np * 2; ++m) {
        const bool off = m == 0;
        const std::string pattern = off ? "" : a.accept[(m - 1) / 2];
        const bool forced = !off && (m - 1) % 2 == 1;
        RuntimeTestHooks hooks;
        hooks.draft_budget_off = forced;
        if (!off && pattern != "ngram") {
          const double accept = std::stod(pattern);
          hooks.draft_source = [&ref, accept, rep](const std::string& id, std::span<const int32_t>, int generated, int len) {
            const size_t run = std::stoul(id.substr(1));  // "b<i>"
            return forced_draft(ref[run], run, generated, len, accept, rep);
          };
        }
        const std::string data = (fs::temp_directory_path() / ("ragd_specbatch_" + std::to_string(::getpid()))).string();
        fs::remove_all(data);
        Runtime rt = open(a, data, off ? 0 : a.k, std::move(hooks));
        std::vector<Observed> outs(static_cast<size_t>(b));
        std::vector<std::thread> th;
        const auto t0 = Clock::now();
        for (int i = 0; i < b; ++i)
          th.emplace_back([&, i] {
            RunRequest r;
            r.id = "b" + std::to_string(i);
            r.prompt = passage + "\n" + passage + "\nAgain, item " + std::to_string(i) + ": " + passage.substr(0, 40);
            r.sampling.max_tokens = a.max_tokens;
            r.sampling.ignore_eos = true;
            r.sampling.temperature = 0.0f;
            r.reuse = ReuseMode::kNone;
            outs[static_cast<size_t>(i)] = run_and_wait(*rt.executor, r);
          });
        for (auto& t : th) t.join();
        const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
        long tokens = 0, acc = 0;
        std::vector<std::vector<int32_t>> ids;
        for (const auto& o : outs) tokens += o.tokens, acc += o.usage.accepted_tokens, ids.push_back(o.token_ids);
        if (off) {
          off_tps.push_back(tokens / wall);
          ref = ids;
        } else {
          tps[m - 1].push_back(tokens / wall);
          accepted[m - 1] = acc;
          same[m - 1] = same[m - 1] && ids == ref;
        }
        rt.stop();
        rt.executor.reset();
        rt.documents.reset();
        fs::remove_all(data);
      }
    }
    auto median = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    const double off = median(off_tps);
    for (size_t p = 0; p < np; ++p) {
      const double bud = median(tps[2 * p]), forced = median(tps[2 * p + 1]);
      std::printf("%-6d %-8s %10.1f %10.1f %8.2fx %10.1f %8.2fx %10ld %9s\n", b, a.accept[p].c_str(), off, bud, bud / off, forced,
                  forced / off, accepted[2 * p], same[2 * p] && same[2 * p + 1] ? "yes" : "NO");
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.mode == "qa") return qa(a);
  if (a.mode == "batch") return batch(a);
  std::fprintf(stderr, "--mode must be qa or batch\n");
  return 2;
}

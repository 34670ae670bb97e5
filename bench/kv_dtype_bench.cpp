// bench_kv_dtype: what storing the KV pool as bf16 or int8 costs in fidelity, on a real model.
//
//   bench_kv_dtype --model DIR [--text FILE] [--prompts 8] [--tokens 1024] [--decode 64] [--threads 2]
//                  [--dtypes bf16,int8]
//
// Prompts are windows of `tokens` tokens of the text (default: the model directory's README.md
// repeated) encoded with the model's tokenizer. For each prompt, f32 KV is the reference: one
// prefill with logits at every position, then `decode` greedy tokens. Each other dtype then
// (a) prefills the same prompt, (b) is teacher-forced along the reference's greedy tokens; it
// reports the largest |Δlogit| over all positions relative to that position's logit range, the
// share of positions whose argmax matches the reference's, the length of the identical greedy
// prefix when it decodes on its own, KV bytes per token, and decode tok/s (one thread count).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ragd/engine/model.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/kernels/kv_dtype.h"

#include "bench_args.h"

using namespace ragd;
using namespace ragd::engine;

namespace {

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "bench_kv_dtype: %s\n", m.c_str());
  std::exit(1);
}

int32_t argmax(std::span<const float> v) { return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

struct Run {
  std::vector<std::vector<float>> logits;  // prompt positions, then one row per decode step
  std::vector<int32_t> greedy;             // tokens chosen (or forced)
  double decode_s = 0.0;
};

// Prefill with all logits, then `decode` steps: greedy, or fed `forced` when it is not empty.
Run run(Model& m, const std::vector<int32_t>& prompt, int decode, const std::vector<int32_t>& forced) {
  Run r;
  BlockTable t;
  StepOutput out;
  SeqStep s{&t, prompt, SeqStep::Logits::kAll};
  if (Status st = m.forward({&s, 1}, &out); !st.ok()) die("prefill: " + st.to_string());
  for (size_t i = 0; i < prompt.size(); ++i) {
    auto row = out.row(static_cast<int>(i));
    r.logits.emplace_back(row.begin(), row.end());
  }
  int32_t next = forced.empty() ? argmax(r.logits.back()) : forced[0];
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < decode; ++i) {
    r.greedy.push_back(next);
    SeqStep d{&t, std::span<const int32_t>(&r.greedy.back(), 1), SeqStep::Logits::kLast};
    if (Status st = m.forward({&d, 1}, &out); !st.ok()) die("decode: " + st.to_string());
    r.logits.emplace_back(out.logits.begin(), out.logits.end());
    next = forced.empty() ? argmax(out.logits) : forced[std::min<size_t>(i + 1, forced.size() - 1)];
  }
  r.decode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.release(m.kv_pool());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, text;
  int prompts = 8, tokens = 1024, decode = 64, threads = 2;
  std::vector<std::string> dtype_names{"bf16", "int8"};
  ragd::bench::BenchArgs args("bench_kv_dtype");
  args.opt("model", &model).opt("text", &text).opt("prompts", &prompts).opt("tokens", &tokens).opt("decode", &decode);
  args.opt("threads", &threads).list("dtypes", &dtype_names);
  if (!args.parse(argc, argv)) return 2;
  if (model.empty()) die("--model DIR is required");
  if (prompts <= 0 || tokens <= 1 || decode < 1) die("--prompts, --tokens and --decode must be positive");
  std::vector<kernels::KvDtype> dtypes;
  for (const std::string& x : dtype_names) {
    auto d = kernels::parse_kv_dtype(x);
    if (!d.ok()) die(d.status().to_string());
    dtypes.push_back(*d);
  }
  auto tok = Tokenizer::from_file(model + "/tokenizer.json");
  if (!tok.ok()) die(tok.status().to_string());
  std::ifstream in(text.empty() ? model + "/README.md" : text);
  if (!in) die("cannot read the text");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::vector<int32_t> ids = (*tok)->encode(ss.str());
  if (ids.empty()) die("the text encodes to no tokens");
  std::vector<int32_t> all;
  while (static_cast<int>(all.size()) < prompts * tokens + tokens) all.insert(all.end(), ids.begin(), ids.end());

  auto load = [&](kernels::KvDtype dt) {
    ModelOptions o;
    o.num_threads = threads;
    o.kv_dtype = dt;
    o.kv_pool_bytes = 256ull << 20;
    auto m = Model::load(model, o);
    if (!m.ok()) die(m.status().to_string());
    return std::move(m).value();
  };
  auto ref_model = load(kernels::KvDtype::kF32);
  std::printf("# bench_kv_dtype model=%s prompts=%d tokens=%d decode=%d threads=%d\n", model.c_str(), prompts,
              tokens, decode, threads);
  std::printf("%-5s %14s %22s %18s %20s %14s\n", "kv", "bytes/token", "max|dlogit|/range", "argmax agree",
              "greedy identical", "decode tok/s");
  std::vector<Run> refs;
  double ref_dec_s = 0.0;
  for (int p = 0; p < prompts; ++p) {
    std::vector<int32_t> prompt(all.begin() + static_cast<size_t>(p) * tokens * 7 / 8,
                                all.begin() + static_cast<size_t>(p) * tokens * 7 / 8 + tokens);
    refs.push_back(run(*ref_model, prompt, decode, {}));
    ref_dec_s += refs.back().decode_s;
  }
  std::printf("%-5s %14zu %22s %18s %20s %14.1f\n", "f32", ref_model->kv_pool().layout().token_bytes(), "(reference)",
              "", "", prompts * decode / ref_dec_s);
  ref_model.reset();
  for (kernels::KvDtype dt : dtypes) {
    auto m = load(dt);
    double worst = 0.0, dec_s = 0.0;
    long agree = 0, rows = 0, same_prefix = 0;
    for (int p = 0; p < prompts; ++p) {
      std::vector<int32_t> prompt(all.begin() + static_cast<size_t>(p) * tokens * 7 / 8,
                                  all.begin() + static_cast<size_t>(p) * tokens * 7 / 8 + tokens);
      const Run forced = run(*m, prompt, decode, refs[p].greedy);
      for (size_t r = 0; r < forced.logits.size(); ++r) {
        const auto& a = forced.logits[r];
        const auto& b = refs[p].logits[r];
        const auto [lo, hi] = std::minmax_element(b.begin(), b.end());
        double d = 0.0;
        for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
        worst = std::max(worst, d / std::max(1e-9f, *hi - *lo));
        agree += argmax(a) == argmax(b);
        ++rows;
      }
      const Run free = run(*m, prompt, decode, {});
      dec_s += free.decode_s;
      size_t k = 0;
      while (k < free.greedy.size() && free.greedy[k] == refs[p].greedy[k]) ++k;
      same_prefix += static_cast<long>(k);
    }
    char agree_s[32], prefix_s[40];
    std::snprintf(agree_s, sizeof agree_s, "%.2f %%", 100.0 * agree / rows);
    std::snprintf(prefix_s, sizeof prefix_s, "%ld / %d", same_prefix, prompts * decode);
    std::printf("%-5s %14zu %21.3f%% %18s %20s %14.1f\n", std::string(kernels::kv_dtype_name(dt)).c_str(),
                m->kv_pool().layout().token_bytes(), 100 * worst, agree_s, prefix_s, prompts * decode / dec_s);
  }
  return 0;
}

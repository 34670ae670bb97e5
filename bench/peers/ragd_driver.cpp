// ragd side of `make bench-peers`: runs a model directory on raw token ids through the engine
// (Model::load + Model::forward), either printing the greedy continuation or timing one prefill and
// N single-token decodes. Same command line and output as bench/peers/llama_driver.c, so the
// script treats both engines alike.
//
//   ragd_peer_driver MODEL_DIR THREADS PROMPT PREFILL DECODE MODE [--weights auto|f32|bf16|f16|q8]
//                    [--kv-dtype f32|bf16|int8]
//     PROMPT   comma-separated token ids, or @FILE holding them (commas or whitespace); repeated
//              cyclically up to PREFILL tokens. No BOS is added: the ids are fed as given.
//     MODE     greedy: prints "tokens: t1,t2,..." (DECODE ids: the argmax after the prompt, then
//                      one per decode step)
//              time:   one untimed warm-up (prefill of at most 1024 tokens + one decode), then prints
//                      "prefill_s S decode_s S" for one forward step over PREFILL tokens
//                      (SeqStep, Logits::kLast) and DECODE one-token steps, each fed the previous
//                      argmax
//     --weights  in-memory weight format (ModelOptions::weights; default auto = checkpoint dtype)
//     --kv-dtype KV pool storage (ModelOptions::kv_dtype; default f32)
//     --attention-share  time mode: also prints "attn_prefill_s S attn_decode_s S", the wall time
//                spent in attention (all layers) within the timed prefill and decode steps
//
// THREADS goes to ModelOptions::num_threads (the engine's OpenMP pool). OMP_WAIT_POLICY is taken
// from the environment as set. Single-threaded driver; exit status 1 on any failure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ragd/engine/model.h"

namespace {

using namespace ragd;
using namespace ragd::engine;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "ragd_peer_driver: %s\n", msg.c_str());
  std::exit(1);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<int32_t> parse_prompt(const std::string& arg) {
  std::string text = arg;
  if (!arg.empty() && arg[0] == '@') {
    std::ifstream in(arg.substr(1));
    if (!in) die(arg.substr(1) + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  std::replace(text.begin(), text.end(), ',', ' ');
  std::istringstream is(text);
  std::vector<int32_t> ids;
  std::string tok;
  while (is >> tok) {
    char* end = nullptr;
    const long v = std::strtol(tok.c_str(), &end, 10);
    if (*end != 0 || v < 0) die("bad token id '" + tok + "' in the prompt");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());  // first on ties
}

// Times the engine's own attention of every layer (--attention-share): the hook runs it unchanged
// (local()) and adds up the wall time.
class AttentionTimer final : public LayerHook {
 public:
  Result<bool> on_attention(const LayerAttention& att) override {
    const auto t0 = Clock::now();
    RAGD_RETURN_IF_ERROR(att.local());
    seconds += seconds_since(t0);
    return true;
  }
  double seconds = 0.0;
};

// One forward step of `tokens` appended to `table`; returns the argmax of the last row's logits.
// `out` is reused across steps so that decode does not time a logits allocation per token.
int32_t step(Model& m, BlockTable& table, std::span<const int32_t> tokens, AttentionTimer* timer = nullptr) {
  static StepOutput out;
  SeqStep s{&table, tokens, SeqStep::Logits::kLast};
  Status st = timer != nullptr ? m.forward_with_hook({&s, 1}, *timer, &out) : m.forward({&s, 1}, &out);
  if (!st.ok()) die("forward: " + st.to_string());
  return argmax(out.row(0));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr,
                 "usage: %s MODEL_DIR THREADS PROMPT PREFILL DECODE greedy|time [--weights auto|f32|bf16|f16|q8] "
                 "[--kv-dtype f32|bf16|int8]\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1], mode = argv[6];
  const int threads = std::atoi(argv[2]), prefill = std::atoi(argv[4]), decode = std::atoi(argv[5]);
  const std::vector<int32_t> prompt = parse_prompt(argv[3]);
  ModelOptions opts;
  opts.num_threads = threads;
  bool attention_share = false;
  for (int i = 7; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--weights" && i + 1 < argc) {
      auto w = parse_weight_format(argv[++i]);
      if (!w.ok()) die(w.status().to_string());
      opts.weights = *w;
    } else if (a == "--attention-share") {
      attention_share = true;
    } else if (a == "--kv-dtype" && i + 1 < argc) {
      auto d = ragd::kernels::parse_kv_dtype(argv[++i]);
      if (!d.ok()) die(d.status().to_string());
      opts.kv_dtype = *d;
    } else {
      std::fprintf(stderr, "ragd_peer_driver: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  const bool greedy = mode == "greedy";
  if (!greedy && mode != "time") die("MODE must be greedy or time");
  if (threads <= 0 || prompt.empty() || prefill <= 0 || decode < 0)
    die("THREADS and PREFILL must be > 0, PROMPT non-empty");

  // KV pool: this run's tokens (K and V of all layers, in the KV dtype) with room to spare, at least 64 MiB.
  auto cfg = ModelConfig::from_json_file(dir + "/config.json");
  if (!cfg.ok()) die(cfg.status().to_string());
  const size_t kv_token = kv_layout(*cfg, opts).token_bytes();
  opts.kv_pool_bytes = std::max<size_t>(64ull << 20, kv_token * static_cast<size_t>(prefill + decode + 64) * 2);
  auto loaded = Model::load(dir, opts);
  if (!loaded.ok()) die("load: " + loaded.status().to_string());
  Model& model = **loaded;
  for (int32_t t : prompt)
    if (t >= model.config().vocab_size) die("a prompt token id is outside the vocabulary");

  std::vector<int32_t> tokens(static_cast<size_t>(prefill));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = prompt[i % prompt.size()];

  BlockTable table;
  if (greedy) {
    int32_t t = step(model, table, tokens);
    std::printf("tokens: ");
    for (int i = 0; i < decode; ++i) {
      std::printf(i ? ",%d" : "%d", t);
      if (i + 1 < decode) t = step(model, table, {&t, 1});
    }
    std::printf("\n");
  } else {
    // Warm-up (threads, scratch): a prefill of at most 1024 tokens and one decode step.
    const std::span<const int32_t> warm(tokens.data(), std::min<size_t>(tokens.size(), 1024));
    int32_t t = step(model, table, warm);
    step(model, table, {&t, 1});
    table.release(model.kv_pool());
    AttentionTimer prefill_attn, decode_attn;
    auto t0 = Clock::now();
    t = step(model, table, tokens, attention_share ? &prefill_attn : nullptr);
    const double prefill_s = seconds_since(t0);
    t0 = Clock::now();
    for (int i = 0; i < decode; ++i) t = step(model, table, {&t, 1}, attention_share ? &decode_attn : nullptr);
    const double decode_s = seconds_since(t0);
    std::printf("prefill_s %.6f decode_s %.6f", prefill_s, decode_s);
    if (attention_share) std::printf(" attn_prefill_s %.6f attn_decode_s %.6f", prefill_attn.seconds, decode_attn.seconds);
    std::printf("\n");
  }
  table.release(model.kv_pool());
  return 0;
}

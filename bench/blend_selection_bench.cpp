// CacheBlend's token selection, diagnosed: does the KV deviation of an early layer find the rows
// whose error matters, and which selection would?
//
//   bench_blend_selection --model DIR [--corpus examples/qa_eval/corpus.jsonl]
//                         [--questions examples/qa_eval/questions.jsonl] [--cases 24] [--greedy 32]
//                         [--docs 4] [--ratios 0.05,0.15,0.30,0.50] [--layers 1,2,4,6] [--threads N]
//
// Prompts: as bench_blend's fidelity section (the default pipeline; a question, its gold passage
// and docs-1 others in a random order; same seed, so the same prompts). Per prompt:
//   full    full prefill of the prompt: the KV of every layer, the question's (tail's) queries of
//           every layer (a hook), the first token's logits and `greedy` greedy tokens;
//   placed  the head, then each passage's chunk KV (computed after the head) placed: naive KV.
// Placed rows = the tokens of the passages not in place (the first passage is exact).
//
// Section 1, per layer l: dev_l(j) = |K_full - K_placed|^2 + |V_full - V_placed|^2 of row j at l,
// CacheBlend's own quantity when every row is recomputed up to l. Compared, as top-r overlap
// (r = 15 % of the placed rows) and Spearman rank correlation, with two "final error" targets:
//   last   dev_{L-1}, the last layer's KV deviation;
//   q-err  the error the question reads from row j: sum over layers, tail tokens and heads of the
//          tail's attention weight on j (full prefill) times |V_full - V_placed| of j's head group.
// Section 2: first-token KL(full || blended), first token same and greedy agreement of repairs:
//   shipped      pipelines::repair (CacheBlend as ragd serves it);
//   dev@s [g]    every row computed in layers < s; at s the top rows by deviation against the slots
//                (g = gradual: 2r there, r from s+1 on; otherwise r at s);
//                at s <= 2 also with the deviation as |dV|^2 only, |dK|^2 only, normalised per KV head
//                (by its mean over the rows) and relative to the placed KV's norm;
//   fixed sets   r of the rows recomputed in every layer, chosen by an offline score: top dev_1,
//                top dev_{L-1} (oracle), top q-err (oracle), top question attention (oracle, no
//                deviation), passage openings (EPIC at the same budget);
// and the cost in row-layers relative to a full recompute of the placed rows.
// RAGD_SELECTION_DUMP=1 prints every placed row of the first prompt (token, dev_1, dev_{L-1} and the
// question's attention, with ranks) to stderr.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <simdjson.h>

#include "ragd/engine/layer_hook.h"
#include "ragd/engine/model.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/pipelines/blend_fidelity.h"
#include "ragd/pipelines/kv_blend.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/prompt_builder.h"
#include "bench_args.h"
#include "blend_prompts.h"

using namespace ragd;
using namespace ragd::pipelines;

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

void die_if(const Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, st.to_string().c_str());
    std::exit(1);
  }
}


Status generate(engine::Model& model, engine::BlockTable& table, std::span<const int32_t> tokens, int greedy,
                std::vector<float>* first_logits, std::vector<int32_t>* out, engine::LayerHook* hook = nullptr) {
  engine::SeqStep s{&table, tokens, engine::SeqStep::Logits::kLast};
  engine::StepOutput o;
  RAGD_RETURN_IF_ERROR(hook ? model.forward_with_hook({&s, 1}, *hook, &o) : model.forward({&s, 1}, &o));
  *first_logits = o.logits;
  out->clear();
  int32_t next = logits_argmax(o.row(0));
  for (int i = 0; i < greedy; ++i) {
    out->push_back(next);
    if (i + 1 == greedy) break;
    engine::SeqStep d{&table, std::span<const int32_t>(&next, 1), engine::SeqStep::Logits::kLast};
    RAGD_RETURN_IF_ERROR(model.forward({&d, 1}, &o));
    next = logits_argmax(o.row(0));
  }
  return Status::OK();
}

// Captures the queries of the rows at positions >= from, per layer: [layer][row][num_heads*head_dim].
class TailQueries final : public engine::LayerHook {
 public:
  explicit TailQueries(int from) : from_(from) {}
  Status on_qkv(const engine::LayerQkv& q, engine::RowSelection*) override {
    const int qd = q.shape.num_heads * q.shape.head_dim;
    if (static_cast<int>(q_.size()) <= q.layer) q_.resize(q.layer + 1);
    for (int r = 0; r < q.rows; ++r)
      if (q.row_info[r].position >= from_) q_[q.layer].insert(q_[q.layer].end(), q.q + r * q.row_stride, q.q + r * q.row_stride + qd);
    return Status::OK();
  }
  std::vector<std::vector<float>> q_;

 private:
  int from_;
};

// A repair plan: either a fixed set of step rows recomputed in every layer (kept at layer 0), or
// deviation selection: keep[l] rows (-1 = no selection) by |fresh - slot| at layer l.
class PlanHook final : public engine::LayerHook {
 public:
  PlanHook(const engine::KvPool& pool, const engine::BlockTable& table) : pool_(pool), table_(table) {}
  std::vector<int> fixed;      // ascending step-row indices; used when non-empty
  std::vector<int> keep;       // per layer
  int score = 0;               // 0 |dK|^2+|dV|^2, 1 |dV|^2, 2 |dK|^2, 3 per-head normalised, 4 relative to |old|^2
  long row_layers = 0;
  Status on_qkv(const engine::LayerQkv& q, engine::RowSelection* sel) override {
    row_layers += q.rows;
    if (!fixed.empty()) {
      if (q.layer == 0) sel->keep(fixed);
      return Status::OK();
    }
    if (q.layer >= static_cast<int>(keep.size()) || keep[q.layer] < 0 || keep[q.layer] >= q.rows) return Status::OK();
    const int width = q.shape.num_kv_heads * q.shape.head_dim, hd = q.shape.head_dim, nkv = q.shape.num_kv_heads;
    std::vector<float> ok(width), ov(width);
    std::vector<double> dev(q.rows), per_head(static_cast<size_t>(q.rows) * nkv), head_mean(nkv, 0.0);
    for (int r = 0; r < q.rows; ++r) {
      table_.read(pool_, q.layer, q.row_info[r].slot, 1, ok.data(), ov.data());
      double d = 0;
      for (int g = 0; g < nkv; ++g) {
        double dk = 0, dv = 0, nk = 0, nv = 0;
        for (int i = g * hd; i < (g + 1) * hd; ++i) {
          const double a = q.k[r * q.row_stride + i] - ok[i], b = q.v[r * q.row_stride + i] - ov[i];
          dk += a * a;
          dv += b * b;
          nk += static_cast<double>(ok[i]) * ok[i];
          nv += static_cast<double>(ov[i]) * ov[i];
        }
        const double x = score == 1 ? dv : score == 2 ? dk : score == 4 ? dk / (nk + 1e-9) + dv / (nv + 1e-9) : dk + dv;
        per_head[static_cast<size_t>(r) * nkv + g] = x;
        head_mean[g] += x / q.rows;
        d += x;
      }
      dev[r] = d;
    }
    if (score == 3)
      for (int r = 0; r < q.rows; ++r) {
        dev[r] = 0;
        for (int g = 0; g < nkv; ++g) dev[r] += per_head[static_cast<size_t>(r) * nkv + g] / (head_mean[g] + 1e-12);
      }
    std::vector<int> idx(q.rows);
    std::iota(idx.begin(), idx.end(), 0);
    const int t = keep[q.layer];
    std::partial_sort(idx.begin(), idx.begin() + t, idx.end(), [&](int a, int b) { return dev[a] != dev[b] ? dev[a] > dev[b] : a < b; });
    idx.resize(t);
    std::sort(idx.begin(), idx.end());
    sel->keep(std::move(idx));
    return Status::OK();
  }

 private:
  const engine::KvPool& pool_;
  const engine::BlockTable& table_;
};

std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<int> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && x[idx[j + 1]] == x[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = (i + j) / 2.0;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size()), m = (n - 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - m) * (rb[i] - m);
    saa += (ra[i] - m) * (ra[i] - m);
    sbb += (rb[i] - m) * (rb[i] - m);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

std::vector<int> top(const std::vector<double>& x, int r) {
  std::vector<int> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + r, idx.end(), [&](int a, int b) { return x[a] != x[b] ? x[a] > x[b] : a < b; });
  idx.resize(r);
  std::sort(idx.begin(), idx.end());
  return idx;
}

double overlap(const std::vector<double>& a, const std::vector<double>& b, int r) {
  const std::vector<int> ta = top(a, r), tb = top(b, r);
  std::vector<int> both;
  std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(both));
  return r > 0 ? static_cast<double>(both.size()) / r : 0.0;
}

// One prompt, prepared: the full prefill's results and the placed table.
struct Prepared {
  std::vector<int32_t> prompt;
  int head_len = 0, region_end = 0;
  std::vector<BlendDoc> docs;
  std::vector<int32_t> rows;        // slots of the placed rows (step rows of a repair)
  std::vector<int> row_doc, row_idx;  // passage index (in prompt order) and index inside it
  std::vector<float> full_logits;
  std::vector<int32_t> full_greedy;
  std::vector<std::vector<double>> dev;  // [layer][row]
  std::vector<double> qerr, qatt;        // [row]
  std::vector<double> qatt_naive;        // [row] the question's attention over the naive context
  std::vector<std::vector<double>> qerr_l, ctxatt_l, ctxerr_l;  // [layer][row]
  engine::BlockTable base;               // head + placed chunk KV
};

struct Score {
  double kl = 0, same = 0, agree = 0, cost = 0;
  int n = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string model_dir, corpus_path = "examples/qa_eval/corpus.jsonl", qpath = "examples/qa_eval/questions.jsonl";
  int cases = 24, greedy = 32, ndocs = 4, threads = 0;
  std::vector<double> ratios = {0.05, 0.15, 0.30, 0.50}, sel_layers = {1, 2, 4, 6};
  ragd::bench::BenchArgs args("bench_blend_selection");
  args.opt("model", &model_dir).opt("corpus", &corpus_path).opt("questions", &qpath).opt("cases", &cases);
  args.opt("greedy", &greedy).opt("docs", &ndocs).list("ratios", &ratios).list("layers", &sel_layers);
  args.opt("threads", &threads);
  if (!args.parse(argc, argv)) return 2;
  if (model_dir.empty()) {
    std::fprintf(stderr, "usage: bench_blend_selection --model DIR [--cases N] [--greedy N] [--ratios ...] [--layers ...]\n");
    return 2;
  }
  // ---- prompts: bench_blend's fidelity construction (same seed, same prompts) ----
  simdjson::dom::parser parser;
  std::vector<std::pair<std::string, std::string>> corpus;  // id, text
  for (const auto& l : read_lines(corpus_path)) {
    simdjson::dom::element e;
    if (parser.parse(l).get(e)) continue;
    corpus.emplace_back(std::string(e["id"].get_string().value_unsafe()), std::string(e["text"].get_string().value_unsafe()));
  }
  std::vector<std::pair<std::string, std::string>> qs;  // question, gold
  for (const auto& l : read_lines(qpath)) {
    simdjson::dom::element e;
    if (parser.parse(l).get(e)) continue;
    qs.emplace_back(std::string(e["question"].get_string().value_unsafe()), std::string(e["gold"].get_string().value_unsafe()));
  }
  if (corpus.size() < static_cast<size_t>(ndocs) || qs.empty()) {
    std::fprintf(stderr, "need a corpus and questions\n");
    return 2;
  }
  engine::ModelOptions mo;
  mo.num_threads = threads;
  mo.kv_pool_bytes = 256ull << 20;
  auto model_r = engine::Model::load(model_dir, mo);
  die_if(model_r.status(), "model");
  engine::Model& model = **model_r;
  auto tok = engine::Tokenizer::from_file(model_dir + "/tokenizer.json");
  die_if(tok.status(), "tokenizer");
  const auto& cfg = model.config();
  const int L = cfg.num_hidden_layers, nh = cfg.num_attention_heads, nkv = cfg.num_key_value_heads, hd = cfg.head_dim;
  const int width = nkv * hd, group = nh / nkv;
  engine::KvPool& pool = model.kv_pool();
  PromptBuilder builder(**tok, cfg);
  const PipelineSpec spec = default_pipeline_spec();
  std::map<std::string, size_t> by_id;
  std::vector<std::string_view> texts;
  for (size_t i = 0; i < corpus.size(); ++i) by_id[corpus[i].first] = i, texts.push_back(corpus[i].second);
  std::mt19937 rng(2026);
  const int sep_len = static_cast<int>((*tok)->encode(spec.separator, false, false).size());

  std::vector<Prepared> preps;
  for (int c = 0; c < cases && c < static_cast<int>(qs.size()); ++c) {
    const auto& q = qs[(c * 7919) % qs.size()];
    PromptSegments p = bench::gold_among_others(builder, spec, **tok, texts, by_id.at(q.second), q.first, ndocs, rng);
    Prepared P;
    P.prompt = p.segs.front();
    P.head_len = static_cast<int>(P.prompt.size());
    for (size_t i = 1; i + 1 < p.segs.size(); ++i) {
      const BlendDoc d{static_cast<int>(P.prompt.size()), static_cast<int>(p.segs[i].size()), i == 1};
      P.docs.push_back(d);
      if (!d.in_place)
        for (int t = 0; t < d.len; ++t) {
          P.rows.push_back(d.start + t);
          P.row_doc.push_back(static_cast<int>(i - 1));
          P.row_idx.push_back(t);
        }
      P.prompt.insert(P.prompt.end(), p.segs[i].begin(), p.segs[i].end());
    }
    P.region_end = static_cast<int>(P.prompt.size());
    P.prompt.insert(P.prompt.end(), p.segs.back().begin(), p.segs.back().end());
    const int total = static_cast<int>(P.prompt.size()), n = static_cast<int>(P.rows.size());

    // Full prefill, with the tail's queries.
    engine::BlockTable full;
    TailQueries tq(P.head_len);
    die_if(generate(model, full, P.prompt, greedy, &P.full_logits, &P.full_greedy, &tq), "full prefill");
    auto fkv = kvstore::gather_kv(pool, full, 0, total);
    die_if(fkv.status(), "gather full");
    full.release(pool);
    // Placed: head, chunk KV, placement.
    engine::SeqStep h{&P.base, std::span<const int32_t>(P.prompt.data(), P.head_len), engine::SeqStep::Logits::kNone};
    engine::StepOutput o;
    die_if(model.forward({&h, 1}, &o), "head");
    std::vector<std::span<const int32_t>> dspans;
    for (const auto& d : p.segs) dspans.emplace_back(d);
    auto ckv = compute_chunk_kv(model, P.base, P.head_len, std::span(dspans).subspan(1, dspans.size() - 2));
    die_if(ckv.status(), "chunk kv");
    for (auto& kv : *ckv) die_if(place_chunk(model, kv, P.base), "place");
    auto pkv = kvstore::gather_kv(pool, P.base, 0, P.region_end);
    die_if(pkv.status(), "gather placed");

    auto at = [&](const kvstore::HostKv& kv, const std::vector<float>& x, int l, int slot) {
      return x.data() + (static_cast<size_t>(l) * kv.num_tokens + slot) * width;
    };
    P.dev.assign(L, std::vector<double>(n));
    std::vector<std::vector<double>> vdev(L, std::vector<double>(static_cast<size_t>(n) * nkv));  // |dV| per kv head
    for (int l = 0; l < L; ++l)
      for (int j = 0; j < n; ++j) {
        const float *kf = at(*fkv, fkv->k, l, P.rows[j]), *vf = at(*fkv, fkv->v, l, P.rows[j]);
        const float *kp = at(*pkv, pkv->k, l, P.rows[j]), *vp = at(*pkv, pkv->v, l, P.rows[j]);
        double d = 0;
        for (int g = 0; g < nkv; ++g) {
          double dv = 0;
          for (int i = g * hd; i < (g + 1) * hd; ++i) {
            d += (kf[i] - kp[i]) * (kf[i] - kp[i]);
            dv += (vf[i] - vp[i]) * (vf[i] - vp[i]);
          }
          d += dv;
          vdev[l][static_cast<size_t>(j) * nkv + g] = std::sqrt(dv);
        }
        P.dev[l][j] = d;
      }
    // Attention on the placed rows (full prefill): from the question (tail) rows, the error it reads
    // there (attention x |dV|) in all layers and per layer; from the region's own later rows per layer.
    P.qerr.assign(n, 0.0);
    P.qatt.assign(n, 0.0);
    P.qerr_l.assign(L, std::vector<double>(n, 0.0));
    P.ctxatt_l.assign(L, std::vector<double>(n, 0.0));
    P.ctxerr_l.assign(L, std::vector<double>(n, 0.0));
    std::vector<int> row_of_slot(total, -1);
    for (int j = 0; j < n; ++j) row_of_slot[P.rows[j]] = j;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    std::vector<double> w(total);
    for (int l = 0; l < L; ++l)
      for (int p = P.head_len; p < total; ++p)
        for (int hh = 0; hh < nh; ++hh) {
          const float* qv = tq.q_[l].data() + (static_cast<size_t>(p - P.head_len) * nh + hh) * hd;
          const int g = hh / group;
          double mx = -1e300;
          for (int s = 0; s <= p; ++s) {
            const float* kk = at(*fkv, fkv->k, l, s) + g * hd;
            double dot = 0;
            for (int i = 0; i < hd; ++i) dot += static_cast<double>(qv[i]) * kk[i];
            w[s] = dot * scale;
            mx = std::max(mx, w[s]);
          }
          double z = 0;
          for (int s = 0; s <= p; ++s) z += (w[s] = std::exp(w[s] - mx));
          const bool tail = p >= P.region_end;
          for (int s = 0; s < p; ++s) {
            const int j = row_of_slot[s];
            if (j < 0) continue;
            const double a = w[s] / z, e = a * vdev[l][static_cast<size_t>(j) * nkv + g];
            if (tail) {
              P.qatt[j] += a;
              P.qerr[j] += e;
              P.qerr_l[l][j] += e;
            } else {
              P.ctxatt_l[l][j] += a;
              P.ctxerr_l[l][j] += e;
            }
          }
        }
    {  // The question's attention over the naive (placed, unrepaired) context: known before any repair.
      engine::BlockTable t2 = P.base.fork(pool);
      TailQueries tq2(P.region_end);
      std::vector<float> lg;
      std::vector<int32_t> gg;
      die_if(generate(model, t2, std::span<const int32_t>(P.prompt).subspan(P.region_end), 1, &lg, &gg, &tq2), "naive tail");
      auto nkv_all = kvstore::gather_kv(pool, t2, 0, total);
      die_if(nkv_all.status(), "gather naive");
      t2.release(pool);
      P.qatt_naive.assign(n, 0.0);
      for (int l = 0; l < L; ++l)
        for (int p = P.region_end; p < total; ++p)
          for (int hh = 0; hh < nh; ++hh) {
            const float* qv = tq2.q_[l].data() + (static_cast<size_t>(p - P.region_end) * nh + hh) * hd;
            const int g = hh / group;
            double mx = -1e300;
            for (int s = 0; s <= p; ++s) {
              const float* kk = at(*nkv_all, nkv_all->k, l, s) + g * hd;
              double dot = 0;
              for (int i = 0; i < hd; ++i) dot += static_cast<double>(qv[i]) * kk[i];
              w[s] = dot * scale;
              mx = std::max(mx, w[s]);
            }
            double z = 0;
            for (int s = 0; s <= p; ++s) z += (w[s] = std::exp(w[s] - mx));
            for (int s = 0; s < p; ++s)
              if (row_of_slot[s] >= 0) P.qatt_naive[row_of_slot[s]] += w[s] / z;
          }
    }
    if (std::getenv("RAGD_SELECTION_DUMP") != nullptr && c == 0) {  // per-row scores of the first prompt
      const std::vector<double> r1 = ranks(P.dev[std::min(1, L - 1)]), rl = ranks(P.dev[L - 1]), rq = ranks(P.qatt);
      for (int j = 0; j < n; ++j) {
        const int32_t id = P.prompt[P.rows[j]];
        std::fprintf(stderr, "doc %d tok %3d %-14s dev1 %8.3f (rank %3.0f) devL %8.2f (rank %3.0f) qatt %.4f (rank %3.0f)\n",
                     P.row_doc[j], P.row_idx[j], ("'" + (*tok)->decode(std::span<const int32_t>(&id, 1)) + "'").c_str(),
                     P.dev[std::min(1, L - 1)][j], n - r1[j], P.dev[L - 1][j], n - rl[j], P.qatt[j], n - rq[j]);
      }
    }
    preps.push_back(std::move(P));
  }

  // ---- section 1: does layer-l deviation predict the final error? ----
  std::printf("## CacheBlend selection diagnosis: %s (%d layers, hidden %d), %zu prompts of %d passages\n\n", model_dir.c_str(), L,
              cfg.hidden_size, preps.size(), ndocs);
  std::printf("### Layer-l KV deviation (every row recomputed up to l) vs the final error, r = 15 %%\n\n");
  std::printf("| layer l | mean dev_l | overlap@r with last-layer dev | Spearman | overlap@r with q-err | Spearman | overlap@r with q-attention | top dev_l in passage openings (first 16) |\n|---|---|---|---|---|---|---|---|\n");
  for (int l = 0; l < L; ++l) {
    double o1 = 0, s1 = 0, o2 = 0, s2 = 0, o3 = 0, opening = 0, md = 0;
    for (const Prepared& P : preps) {
      md += std::accumulate(P.dev[l].begin(), P.dev[l].end(), 0.0) / P.dev[l].size();
      const int r = std::max(1, static_cast<int>(std::ceil(0.15 * P.rows.size())));
      o1 += overlap(P.dev[l], P.dev[L - 1], r);
      s1 += spearman(P.dev[l], P.dev[L - 1]);
      o2 += overlap(P.dev[l], P.qerr, r);
      s2 += spearman(P.dev[l], P.qerr);
      o3 += overlap(P.dev[l], P.qatt, r);
      int op = 0;
      for (int j : top(P.dev[l], r)) op += P.row_idx[j] < 16;
      opening += static_cast<double>(op) / r;
    }
    const double m = static_cast<double>(preps.size());
    std::printf("| %d | %.3g | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f %% |\n", l, md / m, o1 / m, s1 / m, o2 / m, s2 / m, o3 / m, 100 * opening / m);
  }
  {
    double o = 0, s = 0, opening = 0, opening_att = 0;
    for (const Prepared& P : preps) {
      const int r = std::max(1, static_cast<int>(std::ceil(0.15 * P.rows.size())));
      o += overlap(P.qerr, P.dev[L - 1], r);
      s += spearman(P.qerr, P.dev[L - 1]);
      int op = 0, opa = 0;
      for (int j : top(P.qerr, r)) op += P.row_idx[j] < 16;
      for (int j : top(P.qatt, r)) opa += P.row_idx[j] < 16;
      opening += static_cast<double>(op) / r;
      opening_att += static_cast<double>(opa) / r;
    }
    const double m = static_cast<double>(preps.size());
    std::printf("\nq-err vs last-layer dev: overlap@r %.2f, Spearman %.2f; top q-err rows in passage openings %.0f %%, top "
                "q-attention rows %.0f %%\n\n",
                o / m, s / m, 100 * opening / m, 100 * opening_att / m);
  }

  std::printf("### Attention-based scores at layer l vs the question's error (q-err), r = 15 %%\n\n"
              "| layer l | overlap@r q-err_l | overlap@r context attention_l | Spearman | overlap@r context error_l | Spearman |\n|---|---|---|---|---|---|\n");
  for (int l = 0; l < L; ++l) {
    double a = 0, b = 0, bs = 0, c = 0, cs = 0;
    for (const Prepared& P : preps) {
      const int r = std::max(1, static_cast<int>(std::ceil(0.15 * P.rows.size())));
      a += overlap(P.qerr_l[l], P.qerr, r);
      b += overlap(P.ctxatt_l[l], P.qerr, r);
      bs += spearman(P.ctxatt_l[l], P.qerr);
      c += overlap(P.ctxerr_l[l], P.qerr, r);
      cs += spearman(P.ctxerr_l[l], P.qerr);
    }
    const double m = static_cast<double>(preps.size());
    std::printf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", l, a / m, b / m, bs / m, c / m, cs / m);
  }
  std::printf("\n");

  // ---- section 2: fidelity of selections ----
  auto evaluate = [&](const std::function<Status(Prepared&, engine::BlockTable&, long*)>& run) {
    Score sc;
    for (Prepared& P : preps) {
      engine::BlockTable t = P.base.fork(pool);
      long rl = 0;
      die_if(run(P, t, &rl), "repair");
      std::vector<float> lb;
      std::vector<int32_t> gb;
      die_if(generate(model, t, std::span<const int32_t>(P.prompt).subspan(P.region_end), greedy, &lb, &gb), "tail");
      t.release(pool);
      size_t agree = 0;
      while (agree < gb.size() && gb[agree] == P.full_greedy[agree]) ++agree;
      sc.kl += logits_kl(P.full_logits, lb);
      sc.same += gb[0] == P.full_greedy[0];
      sc.agree += static_cast<double>(agree) / greedy;
      sc.cost += static_cast<double>(rl) / (static_cast<double>(P.rows.size()) * L);
      ++sc.n;
    }
    sc.kl /= sc.n;
    sc.same /= sc.n;
    sc.agree /= sc.n;
    sc.cost /= sc.n;
    return sc;
  };
  auto step = [&](Prepared& P, engine::BlockTable& t, PlanHook& hook) {
    std::vector<int32_t> ids;
    for (int32_t s : P.rows) ids.push_back(P.prompt[s]);
    engine::SeqStep s;
    s.table = &t;
    s.tokens = ids;
    s.slots = P.rows;
    s.logits = engine::SeqStep::Logits::kNone;
    engine::StepOutput o;
    return model.forward_with_hook({&s, 1}, hook, &o);
  };
  auto target_of = [](const Prepared& P, double r) { return static_cast<int>(std::ceil(r * P.rows.size() - 1e-9)); };
  auto print = [](const std::string& label, const Score& s) {
    std::printf("| %s | %.4f | %.0f %% | %.0f %% | %.2f |\n", label.c_str(), s.kl, 100 * s.same, 100 * s.agree, s.cost);
  };
  std::printf("### Fidelity of selections (first-token KL vs full prefill, first token same, greedy agreement over %d tokens, cost = "
              "row-layers / full recompute of the placed rows)\n\n| selection | KL | first same | greedy agreement | cost |\n|---|---|---|---|---|\n",
              greedy);
  print("naive concatenation", evaluate([](Prepared&, engine::BlockTable&, long*) { return Status::OK(); }));
  for (double r : ratios) {
    char lab[64];
    std::snprintf(lab, sizeof lab, "%.0f %%", 100 * r);
    print(std::string("shipped repair() ") + lab, evaluate([&](Prepared& P, engine::BlockTable& t, long* rl) {
            BlendParams bp;
            bp.recompute_ratio = r;
            auto st = repair(model, t, P.prompt, P.docs, ReuseMode::kCacheBlend, bp);
            if (st.ok()) *rl = st->row_layers;
            return st.status();
          }));
    for (double sl : sel_layers) {
      const int s = static_cast<int>(sl);
      if (s >= L) continue;
      for (int variant = 0; variant < (s <= 2 ? 5 : 1); ++variant)
      for (bool gradual : {true, false}) {
        if (gradual && s + 1 >= L) continue;
        static const char* kScore[] = {"", " dV only", " dK only", " per-head normalised", " relative"};
        print(std::string("dev@") + std::to_string(s) + kScore[variant] + (gradual ? " gradual " : " ") + lab,
              evaluate([&](Prepared& P, engine::BlockTable& t, long* rl) {
                PlanHook hook(pool, t);
                hook.score = variant;
                const int tg = target_of(P, r), n = static_cast<int>(P.rows.size());
                hook.keep.assign(L, -1);
                if (gradual) {
                  hook.keep[s] = std::min(n, 2 * tg);
                  hook.keep[s + 1] = tg;
                } else {
                  hook.keep[s] = tg;
                }
                Status st = tg > 0 ? step(P, t, hook) : Status::OK();
                *rl = hook.row_layers;
                return st;
              }));
      }
    }
    struct Fixed {
      const char* name;
      std::function<std::vector<double>(const Prepared&)> score;
    };
    const std::vector<Fixed> fixed = {
        {"fixed top dev_1", [&](const Prepared& P) { return P.dev[std::min(1, L - 1)]; }},
        {"fixed top dev_{L-1} (oracle)", [&](const Prepared& P) { return P.dev[L - 1]; }},
        {"fixed top q-err (oracle)", [&](const Prepared& P) { return P.qerr; }},
        {"fixed top q-attention (oracle)", [&](const Prepared& P) { return P.qatt; }},
        {"fixed top q-err at layer 1 (oracle)", [&](const Prepared& P) { return P.qerr_l[std::min(1, L - 1)]; }},
        {"fixed top context attention at layer 1", [&](const Prepared& P) { return P.ctxatt_l[std::min(1, L - 1)]; }},
        {"fixed top context error at layer 1", [&](const Prepared& P) { return P.ctxerr_l[std::min(1, L - 1)]; }},
        {"fixed top context attention at layer 1 x dev_1", [&](const Prepared& P) {
           std::vector<double> x = P.ctxatt_l[std::min(1, L - 1)];
           for (size_t j = 0; j < x.size(); ++j) x[j] *= P.dev[std::min(1, L - 1)][j];
           return x;
         }},
        {"fixed top q-attention over the naive context", [&](const Prepared& P) { return P.qatt_naive; }},
        {"fixed passage endings", [&](const Prepared& P) {
           std::vector<double> x(P.rows.size());
           for (size_t j = 0; j < x.size(); ++j) x[j] = -(P.docs[P.row_doc[j]].len - 1 - P.row_idx[j]) - 1e-6 * j;
           return x;
         }},
        {"fixed separators + top dev_1", [&](const Prepared& P) {
           std::vector<double> x = P.dev[std::min(1, L - 1)];
           for (size_t j = 0; j < x.size(); ++j) x[j] += P.row_idx[j] >= P.docs[P.row_doc[j]].len - sep_len ? 1e12 : 0.0;
           return x;
         }},
        {"fixed separators + top dev_{L-1} (oracle)", [&](const Prepared& P) {
           std::vector<double> x = P.dev[L - 1];
           for (size_t j = 0; j < x.size(); ++j) x[j] += P.row_idx[j] >= P.docs[P.row_doc[j]].len - sep_len ? 1e12 : 0.0;
           return x;
         }},
        {"fixed passage openings", [&](const Prepared& P) {
           std::vector<double> x(P.rows.size());
           for (size_t j = 0; j < x.size(); ++j) x[j] = -P.row_idx[j] - 1e-6 * j;
           return x;
         }},
    };
    for (const Fixed& f : fixed)
      print(std::string(f.name) + " " + lab, evaluate([&](Prepared& P, engine::BlockTable& t, long* rl) {
              PlanHook hook(pool, t);
              const int tg = target_of(P, r);
              if (tg == 0) return Status::OK();
              hook.fixed = top(f.score(P), tg);
              Status st = step(P, t, hook);
              *rl = hook.row_layers;
              return st;
            }));
  }
  for (Prepared& P : preps) P.base.release(pool);
  return 0;
}

#include "ragd/pipelines/blend_fidelity.h"

#include <algorithm>
#include <cmath>

#include "ragd/pipelines/kv_blend.h"

namespace ragd::pipelines {

namespace {

// One sequence: prefill `tokens` after what `table` holds, then `greedy` greedy tokens. Returns the
// first token's logits and the generated tokens.
Status generate(engine::Model& model, engine::BlockTable& table, std::span<const int32_t> tokens, int greedy,
                std::vector<float>* first_logits, std::vector<int32_t>* out) {
  engine::SeqStep s{&table, tokens, engine::SeqStep::Logits::kLast};
  engine::StepOutput o;
  RAGD_RETURN_IF_ERROR(model.forward({&s, 1}, &o));
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

Status one_case(engine::Model& model, const BlendCase& c, ReuseMode mode, const BlendParams& params, int greedy,
                Fidelity* f) {
  engine::KvPool& pool = model.kv_pool();
  engine::BlockTable full, blend;
  auto release = [&] {
    full.release(pool);
    blend.release(pool);
  };
  std::vector<int32_t> prompt = c.head;
  std::vector<BlendDoc> placed;
  for (size_t i = 0; i < c.docs.size(); ++i) {
    placed.push_back({static_cast<int>(prompt.size()), static_cast<int>(c.docs[i].size()), i == 0});
    prompt.insert(prompt.end(), c.docs[i].begin(), c.docs[i].end());
  }
  const size_t region_end = prompt.size();
  prompt.insert(prompt.end(), c.tail.begin(), c.tail.end());
  std::vector<float> lf, lb;
  std::vector<int32_t> gf, gb;
  Status st = generate(model, full, prompt, greedy, &lf, &gf);
  if (st.ok()) {
    engine::SeqStep h{&blend, c.head, engine::SeqStep::Logits::kNone};
    engine::StepOutput o;
    st = model.forward({&h, 1}, &o);
  }
  if (st.ok()) {
    std::vector<std::span<const int32_t>> docs(c.docs.begin(), c.docs.end());
    Result<std::vector<kvstore::HostKv>> kv = compute_chunk_kv(model, blend, static_cast<int>(c.head.size()), docs);
    st = kv.status();
    for (size_t i = 0; st.ok() && i < kv->size(); ++i) st = place_chunk(model, (*kv)[i], blend);
  }
  if (st.ok()) st = repair(model, blend, prompt, placed, mode, params).status();
  if (st.ok())
    st = generate(model, blend, std::span<const int32_t>(prompt).subspan(region_end), greedy, &lb, &gb);
  release();
  RAGD_RETURN_IF_ERROR(st);
  double dmax = 0;
  for (size_t i = 0; i < lf.size(); ++i) dmax = std::max(dmax, static_cast<double>(std::fabs(lf[i] - lb[i])));
  size_t agree = 0;
  while (agree < gf.size() && gf[agree] == gb[agree]) ++agree;
  f->max_abs_logit = std::max(f->max_abs_logit, dmax);
  f->first_token_kl += logits_kl(lf, lb);
  f->greedy_agreement += greedy > 0 ? static_cast<double>(agree) / greedy : 0.0;
  f->first_token_match += !gf.empty() && gf[0] == gb[0] ? 1.0 : 0.0;
  f->cases += 1;
  return Status::OK();
}

}  // namespace

Result<Fidelity> measure_fidelity(engine::Model& model, std::span<const BlendCase> cases, ReuseMode mode,
                                  const BlendParams& params, int greedy_tokens) {
  if (cases.empty()) return Status::InvalidArgument("measure_fidelity: no cases");
  if (greedy_tokens < 1) return Status::InvalidArgument("measure_fidelity: greedy_tokens must be positive");
  Fidelity f;
  for (const BlendCase& c : cases) {
    if (c.head.empty() || c.docs.empty() || c.tail.empty())
      return Status::InvalidArgument("measure_fidelity: a case needs a head, documents and a tail");
    RAGD_RETURN_IF_ERROR(one_case(model, c, mode, params, greedy_tokens, &f));
  }
  f.first_token_kl /= f.cases;
  f.greedy_agreement /= f.cases;
  f.first_token_match /= f.cases;
  return f;
}

int logits_argmax(std::span<const float> x) { return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin()); }

double logits_kl(std::span<const float> a, std::span<const float> b) {
  const double ma = *std::max_element(a.begin(), a.end()), mb = *std::max_element(b.begin(), b.end());
  double za = 0, zb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    za += std::exp(a[i] - ma);
    zb += std::exp(b[i] - mb);
  }
  const double la = ma + std::log(za), lb = mb + std::log(zb);
  double kl = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double lp = a[i] - la, lq = b[i] - lb;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(0.0, kl);
}

}  // namespace ragd::pipelines

#include "eval_adapt_fit.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "adapt_fit.h"
#include "eval_score.h"
#include "ragd/pipelines/pipeline_spec.h"

namespace ragd::tools {

namespace {

namespace fs = std::filesystem;

// The spec file of pipeline `name` in `dir`.
Result<std::pair<pipelines::PipelineSpec, fs::path>> find_spec(const std::string& dir, const std::string& name) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".toml") files.push_back(e.path());
  if (ec) return Status::IOError(dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    RAGD_ASSIGN_OR_RETURN(pipelines::PipelineSpec s, pipelines::load_pipeline_spec(f.string()));
    if (s.name == name) return std::make_pair(std::move(s), f);
  }
  return Status::NotFound("no pipeline '" + name + "' in " + dir);
}

}  // namespace

int run_fit_adapt(const FitAdaptArgs& args, const std::vector<EvalQuestion>& qs, const AskCandidate& ask) {
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "ragctl eval --fit-adapt: %s\n", what.c_str());
    return 2;
  };
  if (args.pipelines_dir.empty()) return fail("needs --pipelines DIR (the directory of the adaptive pipeline's spec)");
  auto found = find_spec(args.pipelines_dir, args.pipeline);
  if (!found.ok()) return fail(found.status().message());
  const pipelines::PipelineSpec& spec = found->first;
  if (!spec.adapt) return fail("pipeline '" + spec.name + "' has no [adapt] table");
  const pipelines::AdaptSpec& a = *spec.adapt;
  const size_t nc = a.candidates.size(), nq = qs.size();
  if (args.levels.empty()) return fail("no load level");
  std::string levels;
  for (int l : args.levels) levels += (levels.empty() ? "" : ",") + std::to_string(l);
  std::printf("ragctl eval --fit-adapt: pipeline %s, %zu candidates x %zu questions at %s in flight\n", spec.name.c_str(),
              nc, nq, levels.c_str());
  // samples[c][i]: candidate c on question i at the first level (unset: the run failed); timing[c]:
  // every level's (TTFT, runs ahead) of candidate c.
  std::vector<std::vector<std::optional<FitSample>>> samples(nc, std::vector<std::optional<FitSample>>(nq));
  std::vector<std::vector<FitSample>> timing(nc);
  int failures = 0;
  for (size_t c = 0; c < nc; ++c) for (size_t li = 0; li < args.levels.size(); ++li) {
    const std::string& name = a.candidates[c].name;
    auto answers = ask([&](size_t) { return name; }, args.levels[li]);
    int right = 0, n = 0;
    double ttft = 0;
    for (size_t i = 0; i < nq; ++i) {
      const Result<EvalAnswer>& ans = *answers[i];
      if (!ans.ok()) {
        std::fprintf(stderr, "ragctl eval: %s (%s): %s\n", qs[i].id.c_str(), name.c_str(), ans.status().message().c_str());
        ++failures;
        continue;
      }
      if (!ans->adapt) return fail("the answers carry no usage.adapt: is '" + spec.name + "' served with its [adapt] table?");
      if (ans->adapt->choice != name) return fail("asked for candidate '" + name + "', the run chose '" + ans->adapt->choice + "'");
      FitSample s;
      s.signals = ans->adapt->signals;
      s.right = exact_match(ans->text, qs[i].answer);
      s.ttft_ms = ans->ttft_ms;
      s.ahead = ans->adapt->ahead;
      s.work_ahead = ans->adapt->work_ahead;
      if (li == 0) samples[c][i] = s;
      timing[c].push_back(s);
      right += s.right;
      ttft += s.ttft_ms;
      ++n;
    }
    std::printf("  %-16s %3d in flight: EM %5.1f%%  mean TTFT %7.1f ms  (%d answered)\n", name.c_str(), args.levels[li],
                n ? 100.0 * right / n : 0.0, n ? ttft / n : 0.0, n);
  }
  if (failures) {
    std::fprintf(stderr, "ragctl eval --fit-adapt: %d runs failed; nothing written\n", failures);
    return 1;
  }
  pipelines::AdaptSpec fitted = a;
  fitted.profile.models.clear();
  fitted.profile.source = fmt::format("{} ({} questions, {} in flight)", args.questions, nq, levels);
  std::printf("\nwhich signal predicts what: per candidate, each signal's logistic weight (per standard deviation, "
              "fitted jointly)\nand its AUC alone for a right answer (0.5 = no information); TTFT = idle + per run ahead\n");
  std::printf("%-16s %6s %7s %9s %9s %15s", "candidate", "n", "EM", "idle ms", "+/run ms", "log loss (const)");
  for (auto s : pipelines::kAdaptSignalNames) std::printf(" %18s", std::string(s).c_str());
  std::printf("\n");
  for (size_t c = 0; c < nc; ++c) {
    std::vector<FitSample> xs;
    for (const auto& s : samples[c]) xs.push_back(*s);
    CandidateFit f = fit_candidate(xs);
    const CandidateFit t = fit_candidate(timing[c]);  // the TTFT model over every level
    f.model.ttft_idle_ms = t.model.ttft_idle_ms;
    f.model.ttft_per_run_ms = t.model.ttft_per_run_ms;
    fitted.profile.models[a.candidates[c].name] = f.model;
    std::printf("%-16s %6d %6.1f%% %9.1f %9.2f %7.3f (%5.3f)", a.candidates[c].name.c_str(), f.model.fit_samples,
                100 * f.model.fit_accuracy, f.model.ttft_idle_ms, f.model.ttft_per_run_ms, f.log_loss, f.base_log_loss);
    for (const auto& r : f.signals) std::printf(" %+9.2f / %6.3f", r.weight, r.auc);
    std::printf("\n");
  }
  // The TTFT quantile model, over every level's answers of every candidate, and of mixed runs.
  if (args.ttft_quantile > 0) {
    std::vector<std::vector<FitSample>> qsamples = timing;
    std::map<int, std::vector<std::pair<size_t, FitSample>>> mixed;  // by level: (candidate, answer)
    if (args.mixed_runs)
      for (int level : args.levels) {
        if (level < 2) continue;
        auto answers = ask([&](size_t i) { return a.candidates[i % nc].name; }, level);
        double ttft = 0;
        int n = 0;
        for (size_t i = 0; i < nq; ++i) {
          const Result<EvalAnswer>& ans = *answers[i];
          if (!ans.ok()) {
            std::fprintf(stderr, "ragctl eval: %s (mixed): %s\n", qs[i].id.c_str(), ans.status().message().c_str());
            return 1;
          }
          FitSample s;
          s.ttft_ms = ans->ttft_ms;
          s.ahead = ans->adapt->ahead;
          s.work_ahead = ans->adapt->work_ahead;
          qsamples[i % nc].push_back(s);
          mixed[level].emplace_back(i % nc, s);
          ttft += s.ttft_ms;
          ++n;
        }
        std::printf("  %-16s %3d in flight: mean TTFT %7.1f ms  (%d answered, candidate i mod %zu)\n", "mixed", level,
                    ttft / std::max(1, n), n, nc);
      }
    const QuantileFit qf = fit_ttft_quantile(qsamples, args.ttft_quantile);
    fitted.profile.ttft_quantile = args.ttft_quantile;
    std::printf("\nTTFT quantile %.3g under load (linear quantile regression over the %zu levels): ms + per run "
                "ahead + per 1000 tokens of work ahead;\nin-sample coverage (fraction at or under the prediction) "
                "and, per level, the observed and the mean predicted quantile\n",
                args.ttft_quantile, args.levels.size());
    for (size_t c = 0; c < nc; ++c) {
      pipelines::AdaptModel& m = fitted.profile.models[a.candidates[c].name];
      m.ttft_q = qf.models[c];
      m.has_ttft_q = true;
      std::string per_level;
      for (int level : args.levels) {
        // timing[c] holds the levels in order, one block of answered questions each.
        std::vector<double> obs;
        double pred = 0;
        size_t i0 = 0;
        for (size_t li = 0; li < args.levels.size() && args.levels[li] != level; ++li) i0 += nq;
        for (size_t i = i0; i < std::min(i0 + nq, timing[c].size()); ++i) {
          obs.push_back(timing[c][i].ttft_ms);
          pred += predict_ttft_quantile(m.ttft_q, timing[c][i]);
        }
        if (!obs.empty())
          per_level += fmt::format("  {}: {:.0f} / {:.0f}", level, percentile(obs, 100 * args.ttft_quantile),
                                   pred / static_cast<double>(obs.size()));
      }
      std::printf("  %-16s %7.1f %+7.2f %+7.2f  coverage %5.1f%%%s\n", a.candidates[c].name.c_str(), m.ttft_q[0],
                  m.ttft_q[1], m.ttft_q[2], 100 * qf.coverage[c], per_level.c_str());
    }
    for (const auto& [level, xs] : mixed) {
      std::vector<double> obs;
      int under = 0;
      for (const auto& [c, x] : xs) {
        obs.push_back(x.ttft_ms);
        under += x.ttft_ms <= predict_ttft_quantile(qf.models[c], x) + 1e-9;
      }
      std::printf("  mixed at %d: observed quantile %.0f ms, %.1f%% at or under their predictions\n", level,
                  percentile(obs, 100 * args.ttft_quantile), 100.0 * under / std::max<size_t>(1, xs.size()));
    }
  }
  // What the policy would choose on these questions with nothing ahead, scored by the answers each
  // candidate actually gave (in-sample: the profile was fitted on them).
  std::printf("\nthe policy on these questions (in-sample, nothing ahead):\n");
  for (pipelines::AdaptObjective o : {pipelines::AdaptObjective::kQuality, pipelines::AdaptObjective::kBalanced}) {
    pipelines::AdaptGoal g;
    g.objective = o;
    g.quality_tolerance = a.quality_tolerance;
    for (size_t c = 0; c < nc; ++c) g.allowed.push_back(c);
    int right = 0;
    double ttft = 0;
    std::map<std::string, int> chosen;
    for (size_t i = 0; i < nq; ++i) {
      pipelines::QuerySignals q;
      q.retrieved = true;
      const auto& f = samples[0][i]->signals;
      q.score_margin = f[0];
      q.lexical_agreement = f[1];
      q.lexical_margin = f[2];
      q.question_tokens = static_cast<int>(f[3]);
      const pipelines::AdaptChoice ch = pipelines::choose_adapt(fitted, g, q, pipelines::LoadSignals{});
      const FitSample& got = *samples[ch.index][i];
      right += got.right;
      ttft += got.ttft_ms;
      ++chosen[a.candidates[ch.index].name];
    }
    std::string line;
    for (const auto& [k, n] : chosen) line += fmt::format(" {} {}", k, n);
    std::printf("  %-9s EM %5.1f%%  mean TTFT %7.1f ms  choices:%s\n", std::string(enum_name(o)).c_str(),
                nq ? 100.0 * right / nq : 0.0, nq ? ttft / nq : 0.0, line.c_str());
  }
  const fs::path out = args.out.empty() ? found->second.parent_path() / found->second.stem().concat(".profile")
                                        : fs::path(args.out);
  std::ofstream f(out);
  if (!f || !(f << pipelines::adapt_profile_toml(fitted.profile))) {
    std::fprintf(stderr, "ragctl eval --fit-adapt: %s: cannot write\n", out.string().c_str());
    return 1;
  }
  std::printf("\nprofile written to %s (read with the spec at the next start)\n", out.string().c_str());
  return 0;
}

}  // namespace ragd::tools

// Semantic reuse of answers: how close paraphrases and near-misses come, and what a hit saves.
//
//   python3 tools/train/reword_eval.py examples/qa_eval/questions.jsonl /tmp/reword
//   bench_semantic_cache --model models/ragd-qa --original /tmp/reword/original.jsonl
//                        --reworded /tmp/reword/reworded.jsonl --near /tmp/reword/near_miss.jsonl
//                        [--questions N] [--grounding 1|0] [--max-share 0.2] [--threads 2]
//
// Over the QA corpus (examples/qa_eval/corpus.jsonl) with a [semantic_cache] pipeline whose
// threshold is 0 (every lookup returns the closest earlier question over the same passages, and
// its cosine), grounding check on or off (--grounding): each original question is asked (a miss:
// its answer is kept), then its paraphrase (held-out wording, the same fact) or one of its
// near-misses (the same wording with another question's topic noun, place or person: another
// fact). A pair that retrieves other passages, or that the grounding check refuses, never hits at
// any threshold; the others hit at thresholds up to their cosine. Printed: per threshold,
// paraphrase hit rate and near-miss false hits (by changed field); then the TTFT of hits against
// misses. Each pair goes to a fresh tenant holding only its original, so that earlier pairs do not
// answer it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <simdjson.h>
#include <unistd.h>

#include "ragd/pipelines/runtime.h"
#include "bench_args.h"
#include "qa_corpus.h"
#include "run_client.h"

namespace fs = std::filesystem;
using namespace ragd;
using namespace ragd::pipelines;
using ragd::bench::Observed;
using ragd::bench::run_and_wait;

namespace {

struct Q {
  std::string id, question, kind, changed;
};

std::vector<Q> read_questions(const std::string& path, size_t limit) {
  std::vector<Q> out;
  std::ifstream in(path);
  simdjson::dom::parser p;
  for (std::string line; std::getline(in, line) && out.size() < limit;) {
    simdjson::dom::element e;
    std::string_view id, q, kind, changed;
    if (p.parse(line).get(e) || e["id"].get_string().get(id) || e["question"].get_string().get(q) || e["kind"].get_string().get(kind)) continue;
    if (e["changed"].get_string().get(changed)) changed = "";
    out.push_back({std::string(id), std::string(q), std::string(kind), std::string(changed)});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, original, reworded, near_path, source_dir = RAGD_SOURCE_DIR;
  int questions = 300, threads = 2, grounding = 1;
  double max_share = 0.2;
  ragd::bench::BenchArgs args("bench_semantic_cache");
  args.opt("model", &model).opt("original", &original).opt("reworded", &reworded).opt("near", &near_path).opt("questions", &questions);
  args.opt("grounding", &grounding).opt("max-share", &max_share);
  args.opt("threads", &threads).opt("source-dir", &source_dir);
  if (!args.parse(argc, argv)) return 2;
  if (model.empty() || original.empty() || reworded.empty() || near_path.empty()) {
    std::fprintf(stderr, "--model, --original, --reworded and --near are required\n");
    return 2;
  }
  const auto orig = read_questions(original, static_cast<size_t>(questions));
  const auto rew = read_questions(reworded, static_cast<size_t>(questions));
  if (orig.size() != rew.size() || orig.empty()) {
    std::fprintf(stderr, "the two files must hold the same questions\n");
    return 2;
  }
  std::map<std::string, std::vector<Q>> near_of;
  for (Q& q : read_questions(near_path, SIZE_MAX)) near_of[q.id].push_back(std::move(q));
  const std::string tmp = (fs::temp_directory_path() / ("ragd_semcache_" + std::to_string(::getpid()))).string();
  fs::remove_all(tmp);
  fs::create_directories(tmp + "/pipelines");
  std::ofstream(tmp + "/pipelines/sem.toml") << "[pipeline]\nname = \"sem\"\n[retriever]\ntop_k = 4\n[reuse]\nmode = \"none\"\n"
                                                "[generation]\nmax_tokens = 16\n[semantic_cache]\nthreshold = 0.0\n"
                                             << "grounding = " << (grounding ? "true" : "false") << "\n"
                                             << "grounding_max_share = " << max_share << "\n";
  RuntimeOptions o;
  o.model_dir = model;
  o.data_dir = tmp + "/data";
  o.pipelines_dir = tmp + "/pipelines";
  o.model.num_threads = threads;
  o.retrieval_threads = 1;
  auto rt = open_runtime(o);
  if (!rt.ok()) {
    std::fprintf(stderr, "open_runtime: %s\n", rt.status().to_string().c_str());
    return 1;
  }
  {
    const std::vector<DocumentInput> docs = ragd::bench::read_qa_corpus(source_dir);
    auto s = rt->documents->ingest(docs);
    if (!s.ok()) {
      std::fprintf(stderr, "ingest: %s\n", s.status().to_string().c_str());
      return 1;
    }
  }
  auto ask = [&](const std::string& q, const std::string& tenant) {
    RunRequest r;
    r.pipeline = "sem";
    r.query = q;
    r.tenant = tenant;
    r.sampling.temperature = 0.0f;
    return run_and_wait(*rt->executor, r);
  };
  // similarity of a hit; -1 = a miss (other passages, or refused by the grounding check)
  std::vector<double> para;
  std::map<std::string, std::vector<double>> near;  // by changed field
  std::vector<double> ttft_hit, ttft_miss;
  size_t pair = 0;
  auto ask_pair = [&](const std::string& first, const std::string& second, double* sim) {
    const std::string tenant = "t" + std::to_string(pair++);
    const Observed a = ask(first, tenant);
    if (!a.ok) return false;
    ttft_miss.push_back(a.ttft_ms);
    const Observed b = ask(second, tenant);
    if (!b.ok) return false;
    const bool hit = b.usage.semantic_cache == "hit";
    *sim = hit ? b.usage.semantic_similarity : -1.0;
    if (hit) ttft_hit.push_back(b.ttft_ms);
    return true;
  };
  for (size_t i = 0; i < orig.size(); ++i) {
    double sim = 0;
    if (!ask_pair(orig[i].question, rew[i].question, &sim)) return 1;
    para.push_back(sim);
    for (const Q& nm : near_of[orig[i].id]) {
      if (!ask_pair(orig[i].question, nm.question, &sim)) return 1;
      near[nm.changed].push_back(sim);
    }
  }
  std::vector<double> all_near;
  for (const auto& [field, v] : near) all_near.insert(all_near.end(), v.begin(), v.end());
  std::printf("# %zu paraphrase pairs (held-out wordings), %zu near-miss pairs (another noun / place / person), model %s, "
              "embedder: the corpus's, grounding check %s (max share %.2f)\n",
              para.size(), all_near.size(), model.c_str(), grounding ? "on" : "off", max_share);
  auto can_hit = [](const std::vector<double>& v) { return std::count_if(v.begin(), v.end(), [](double s) { return s >= -0.5; }); };
  std::printf("# pairs that can hit (same passages%s): paraphrases %ld/%zu, near-misses %ld/%zu\n",
              grounding ? ", same grounded terms" : "", can_hit(para), para.size(), can_hit(all_near), all_near.size());
  std::printf("%-9s %16s %18s", "threshold", "paraphrase hits", "near-miss hits");
  for (const auto& [field, v] : near) std::printf(" %10s", (field + "/" + std::to_string(v.size())).c_str());
  std::printf("\n");
  for (double t : {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98}) {
    auto rate = [&](const std::vector<double>& v) { return std::count_if(v.begin(), v.end(), [&](double s) { return s >= t; }); };
    std::printf("%-9.2f %9ld (%4.1f%%) %11ld (%4.1f%%)", t, rate(para), 100.0 * rate(para) / para.size(), rate(all_near),
                100.0 * rate(all_near) / std::max<size_t>(1, all_near.size()));
    for (const auto& [field, v] : near) std::printf(" %10ld", rate(v));
    std::printf("\n");
  }
  const std::vector<double>& near_all = all_near;
  double best_near = -1;
  for (double s : near_all) best_near = std::max(best_near, s);
  std::printf("highest near-miss cosine over the same passages: %.4f (a threshold above it has no false hit here)\n", best_near);
  auto med = [](std::vector<double> v) { if (v.empty()) return 0.0; std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  std::printf("TTFT median: miss (full run) %.1f ms, hit %.1f ms (%zu hits)\n", med(ttft_miss), med(ttft_hit), ttft_hit.size());
  rt->stop();
  rt->executor.reset();
  rt->documents.reset();
  fs::remove_all(tmp);
  return 0;
}

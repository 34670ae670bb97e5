// Semantic reuse of answers: how close paraphrases and near-misses come, and what a hit saves.
//
//   python3 tools/train/reword_eval.py examples/qa_eval/questions.jsonl /tmp/reword
//   bench_semantic_cache --model models/ragd-qa --original /tmp/reword/original.jsonl
//                        --reworded /tmp/reword/reworded.jsonl [--questions N] [--threads 2]
//
// Over the QA corpus (examples/qa_eval/corpus.jsonl) with a [semantic_cache] pipeline whose
// threshold is 0 (every lookup returns the closest earlier question over the same passages, and
// its cosine): each original question is asked (a miss: its answer is kept), then its paraphrase
// (held-out wording, the same fact) and a near-miss (the same wording with another question's
// place: another fact). A pair that retrieves other passages never hits at any threshold; the
// others hit at thresholds up to their cosine. Printed: per threshold, paraphrase hit rate and
// near-miss false hits; then the TTFT of hits against misses. Each paraphrase / near-miss goes to a
// fresh tenant holding only its original, so that earlier pairs do not answer it.
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
  std::string id, question, kind;
};

std::vector<Q> read_questions(const std::string& path, size_t limit) {
  std::vector<Q> out;
  std::ifstream in(path);
  simdjson::dom::parser p;
  for (std::string line; std::getline(in, line) && out.size() < limit;) {
    simdjson::dom::element e;
    std::string_view id, q, kind;
    if (p.parse(line).get(e) || e["id"].get_string().get(id) || e["question"].get_string().get(q) || e["kind"].get_string().get(kind)) continue;
    out.push_back({std::string(id), std::string(q), std::string(kind)});
  }
  return out;
}

// The question's last capitalised word (its place), or "".
std::string place_of(const std::string& q) {
  size_t end = q.find_last_of("?");
  if (end == std::string::npos) end = q.size();
  size_t b = q.rfind(' ', end);
  const std::string w = q.substr(b + 1, end - b - 1);
  return !w.empty() && std::isupper(static_cast<unsigned char>(w[0])) ? w : "";
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, original, reworded, source_dir = RAGD_SOURCE_DIR;
  int questions = 300, threads = 2;
  ragd::bench::BenchArgs args("bench_semantic_cache");
  args.opt("model", &model).opt("original", &original).opt("reworded", &reworded).opt("questions", &questions);
  args.opt("threads", &threads).opt("source-dir", &source_dir);
  if (!args.parse(argc, argv)) return 2;
  if (model.empty() || original.empty() || reworded.empty()) {
    std::fprintf(stderr, "--model, --original and --reworded are required\n");
    return 2;
  }
  const auto orig = read_questions(original, static_cast<size_t>(questions));
  const auto rew = read_questions(reworded, static_cast<size_t>(questions));
  if (orig.size() != rew.size() || orig.empty()) {
    std::fprintf(stderr, "the two files must hold the same questions\n");
    return 2;
  }
  const std::string tmp = (fs::temp_directory_path() / ("ragd_semcache_" + std::to_string(::getpid()))).string();
  fs::remove_all(tmp);
  fs::create_directories(tmp + "/pipelines");
  std::ofstream(tmp + "/pipelines/sem.toml") << "[pipeline]\nname = \"sem\"\n[retriever]\ntop_k = 4\n[reuse]\nmode = \"none\"\n"
                                                "[generation]\nmax_tokens = 16\n[semantic_cache]\nthreshold = 0.0\n";
  RuntimeOptions o;
  o.model_dir = model;
  o.data_dir = tmp + "/data";
  o.pipelines_dir = tmp + "/pipelines";
  o.num_threads = threads;
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
    r.overrides.temperature = 0.0f;
    return run_and_wait(*rt->executor, r);
  };
  // similarity of a hit; -1 = a miss (other passages)
  std::vector<double> para, near;
  std::vector<double> ttft_hit, ttft_miss;
  for (size_t i = 0; i < orig.size(); ++i) {
    const std::string other = place_of(orig[(i + 1) % orig.size()].question), mine = place_of(orig[i].question);
    std::string nm = orig[i].question;
    if (!mine.empty() && !other.empty() && other != mine) nm.replace(nm.rfind(mine), mine.size(), other);
    for (int which = 0; which < 2; ++which) {
      if (which == 1 && nm == orig[i].question) continue;
      const std::string tenant = "t" + std::to_string(i) + "-" + std::to_string(which);
      const Observed a = ask(orig[i].question, tenant);
      if (!a.ok) return 1;
      ttft_miss.push_back(a.ttft_ms);
      const Observed b = ask(which == 0 ? rew[i].question : nm, tenant);
      if (!b.ok) return 1;
      const bool hit = b.usage.semantic_cache == "hit";
      (which == 0 ? para : near).push_back(hit ? b.usage.semantic_similarity : -1.0);
      if (hit) ttft_hit.push_back(b.ttft_ms);
    }
  }
  std::printf("# %zu paraphrase pairs (held-out wordings), %zu near-miss pairs (another place), model %s, embedder: the corpus's\n",
              para.size(), near.size(), model.c_str());
  auto same_passages = [](const std::vector<double>& v) { return std::count_if(v.begin(), v.end(), [](double s) { return s >= -0.5; }); };
  std::printf("# same passages retrieved: paraphrases %ld/%zu, near-misses %ld/%zu\n", same_passages(para), para.size(),
              same_passages(near), near.size());
  std::printf("%-9s %16s %18s\n", "threshold", "paraphrase hits", "near-miss hits");
  for (double t : {0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98}) {
    auto rate = [&](const std::vector<double>& v) { return std::count_if(v.begin(), v.end(), [&](double s) { return s >= t; }); };
    std::printf("%-9.2f %9ld (%4.1f%%) %11ld (%4.1f%%)\n", t, rate(para), 100.0 * rate(para) / para.size(), rate(near),
                100.0 * rate(near) / std::max<size_t>(1, near.size()));
  }
  double best_near = -1;
  for (double s : near) best_near = std::max(best_near, s);
  std::printf("highest near-miss cosine over the same passages: %.4f (a threshold above it has no false hit here)\n", best_near);
  auto med = [](std::vector<double> v) { if (v.empty()) return 0.0; std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  std::printf("TTFT median: miss (full run) %.1f ms, hit %.1f ms (%zu hits)\n", med(ttft_miss), med(ttft_hit), ttft_hit.size());
  rt->stop();
  rt->executor.reset();
  rt->documents.reset();
  fs::remove_all(tmp);
  return 0;
}

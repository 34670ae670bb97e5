// The executor's side of output-length prediction: the length log it writes (one line per finished
// run, the length the scheduler is not told), srtf with a trained head loaded from its file, and
// the options' checks.
#include "executor_fixture.h"

#include <map>

#include "ragd/common/text_file.h"
#include "ragd/pipelines/length_log.h"
#include "ragd/pipelines/length_model.h"

namespace ragd::pipelines {
namespace {

// A suite of its own (the fixture class is per translation unit).
class LengthExecutorTest : public ExecutorTest {};

RunRequest plain(const std::string& id, const std::string& prompt) {
  RunRequest r;
  r.id = id;
  r.prompt = prompt;
  r.sampling.max_tokens = 20;
  r.sampling.ignore_eos = true;
  r.reuse = ReuseMode::kNone;
  return r;
}

TEST_F(LengthExecutorTest, LengthLogRecordsEachFinishedRunWithTheLengthTheSchedulerWasNotTold) {
  const std::string dir = tmpdir("lenlog"), log = dir + "/runs.jsonl";
  RuntimeOptions o = options("");
  o.length_log = log;
  o.test_hooks.stop_after_tokens = [](const std::string& id) { return id == "a" ? 3 : id == "b" ? 5 : 0; };
  Runtime rt = open(o, false);
  Collector c;
  const std::string pa = "The harbor was quiet when the ship came in", pb = "List every tower of the castle";
  RunOutput a, b, d;
  ASSERT_TRUE(rt.executor->submit(plain("a", pa), c.sink(&a)).ok());
  ASSERT_TRUE(rt.executor->submit(plain("b", pb), c.sink(&b)).ok());
  ASSERT_TRUE(rt.executor->submit(plain("d", pb), c.sink(&d)).ok());
  ASSERT_TRUE(c.wait(&a) && c.wait(&b) && c.wait(&d));
  EXPECT_EQ(a.tokens.size(), 3u);
  EXPECT_EQ(b.tokens.size(), 5u);
  EXPECT_EQ(d.tokens.size(), 20u);
  rt.stop();
  auto text = read_text_file(log);
  ASSERT_TRUE(text.ok());
  auto lines = parse_length_log(*text, log);
  ASSERT_TRUE(lines.ok()) << lines.status().to_string();
  ASSERT_EQ(lines->size(), 3u);
  std::map<std::string, int> by_text_len;
  for (const auto& s : *lines) {
    EXPECT_EQ(s.features.max_tokens, 20) << "the hidden stop leaked into max_tokens";
    EXPECT_EQ(s.features.pipeline, "");
    EXPECT_GT(s.features.prompt_tokens, 3);
    by_text_len[s.features.text] += s.output_tokens;
  }
  EXPECT_EQ(by_text_len[pa], 3);
  EXPECT_EQ(by_text_len[pb], 5 + 20);
  fs::remove_all(dir);
}

TEST_F(LengthExecutorTest, SrtfWithATrainedHeadServesRunsAndRefusesBadOptions) {
  const std::string dir = tmpdir("lenhead"), head = dir + "/head.txt";
  std::vector<LengthSample> train;
  for (int i = 0; i < 40; ++i) {
    LengthSample s;
    s.features = {"", i % 2 ? "list every tower of the castle" : "when did the ship come", 12, 20};
    s.output_tokens = i % 2 ? 18 : 2;
    train.push_back(s);
  }
  auto m = LengthModel::train(train, LengthTrainOptions{.dim = 128});
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->save(head).ok());
  // Greedy outputs do not depend on the order runs are served in.
  std::vector<std::vector<int32_t>> outs[2];
  for (int k = 0; k < 2; ++k) {
    RuntimeOptions o = options("");
    o.scheduler.max_running = 1;
    if (k == 1) {
      o.scheduler.policy = SchedPolicy::kSrtf;
      o.length_model = head;
    }
    Runtime rt = open(o, false);
    Collector c;
    std::vector<RunOutput> r(4);
    const char* prompts[] = {"list every tower of the castle", "when did the ship come", "list every tower of the castle",
                             "when did the ship come"};
    for (int i = 0; i < 4; ++i)
      ASSERT_TRUE(rt.executor->submit(plain("r" + std::to_string(i), prompts[i]), c.sink(&r[i])).ok());
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(c.wait(&r[i]));
      ASSERT_TRUE(r[i].error.ok()) << r[i].error.to_string();
      outs[k].push_back(r[i].tokens);
    }
    EXPECT_EQ(rt.executor->stats().policy, k ? "srtf" : "fcfs");
    rt.stop();
  }
  EXPECT_EQ(outs[0], outs[1]);
  RuntimeOptions bad = options("");
  bad.scheduler.policy = SchedPolicy::kSrtf;
  bad.length_model = dir + "/missing.txt";
  auto r1 = open_runtime(bad);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("missing.txt"), std::string::npos) << r1.status().message();
  bad.scheduler.policy = SchedPolicy::kSjf;
  bad.length_model = head;
  auto r2 = open_runtime(bad);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("runtime.length_model is read by the srtf scheduler only"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ragd::pipelines

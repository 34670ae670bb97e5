// Sequence parallelism inside the executor (RuntimeOptions::sp_workers): a prompt at or over the
// threshold runs on the in-process group (ring prefill, sharded decode) and gives the same greedy
// tokens and log-probabilities as one worker; shorter prompts run in the batch as before; a
// client that stops reading cancels the long run and the group serves the next one; bad options
// are refused by name.
#include "executor_fixture.h"
#include "ragd/pipelines/long_context_policy.h"
#include "ragd/seqparallel/nccl_communicator.h"
#include "ragd/seqparallel/perf_model.h"
#include "ragd/seqparallel/sharded_sequence.h"

namespace ragd::pipelines {
namespace {

class ExecutorSpTest : public ExecutorTest {
 protected:
  RunOutput raw(Executor& ex, const std::string& prompt, int max_tokens, int cancel_after = -1) {
    RunRequest r;
    r.prompt = prompt;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    RunOutput out;
    Collector c;
    Status st = ex.submit(r, c.sink(&out, cancel_after));
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (st.ok()) EXPECT_TRUE(c.wait(&out));
    return out;
  }
  // One worker whose pool holds everything (no data dir): the output a run must reproduce.
  std::vector<RunOutput> reference(const std::string& data, const std::string& prompt, std::vector<int> max_tokens) {
    RuntimeOptions o = options(data);
    o.data_dir = "";
    Runtime one = open(o, false);
    std::vector<RunOutput> outs;
    for (int n : max_tokens) {
      outs.push_back(raw(*one.executor, prompt, n));
      EXPECT_TRUE(outs.back().error.ok()) << outs.back().error.to_string();
    }
    close(one);
    return outs;
  }
};

std::string long_text(int sentences) {
  std::string s;
  for (int i = 0; i < sentences; ++i) {
    s += "The harbor log for day " + std::to_string(i * 7 + 3) + " lists " + kTopics[i % 12] + ". ";
  }
  return s;
}

TEST_F(ExecutorSpTest, LongPromptsGoSequenceParallelWithTheSameOutput) {
  const std::string data1 = tmpdir("sp1"), data2 = tmpdir("sp2");
  RuntimeOptions o1 = options(data1);
  o1.data_dir = "";
  Runtime one = open(o1, false);
  const std::string lng = long_text(40), shrt = long_text(1);
  RunOutput ref_long = raw(*one.executor, lng, 24);
  RunOutput ref_short = raw(*one.executor, shrt, 8);
  ASSERT_TRUE(ref_long.error.ok()) << ref_long.error.to_string();
  EXPECT_EQ(ref_long.usage.sp_workers, 0);
  close(one);
  for (int workers : {2, 3}) {
    for (const char* kind : {"zigzag", "contiguous"}) {
      RuntimeOptions o = options(data2);
      o.data_dir = "";
      o.sp_workers = workers;
      o.sp_threshold_tokens = 256;
      o.sp_partition = *seqparallel::parse_partition(kind);
      o.sp_chunk_tokens = workers == 3 ? 50 : 0;  // chunked ring prefill (the rank 0 setting reaches every worker)
      Runtime rt = open(o, false);
      const std::string what = std::to_string(workers) + " workers, " + kind + (o.sp_chunk_tokens ? ", chunks of 50" : "");
      RunOutput l = raw(*rt.executor, lng, 24);
      ASSERT_TRUE(l.error.ok()) << what << ": " << l.error.to_string();
      EXPECT_EQ(l.usage.sp_workers, workers) << what;
      EXPECT_GE(l.usage.prompt_tokens, 256) << what;
      expect_same(l, ref_long, what);
      RunOutput s = raw(*rt.executor, shrt, 8);
      EXPECT_EQ(s.usage.sp_workers, 0) << what << ": a short prompt stays in the batch";
      expect_same(s, ref_short, what + " (short)");
      // A client that goes away mid-run cancels it; the group then serves the next long prompt.
      RunOutput c = raw(*rt.executor, lng, 24, /*cancel_after=*/3);
      EXPECT_EQ(c.finish, "cancelled") << what;
      EXPECT_EQ(c.tokens.size(), 3u) << what;
      RunOutput again = raw(*rt.executor, lng, 24);
      expect_same(again, ref_long, what + " (after a cancelled run)");
      close(rt);
    }
  }
  RuntimeOptions bad = options(data2);
  bad.data_dir = "";
  bad.sp_workers = 2;
  bad.sp_partition = static_cast<seqparallel::PartitionKind>(9);  // no name parses to it; only a cast
  auto r = open_runtime(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sp_partition"), std::string::npos) << r.status().to_string();
  bad.sp_partition = seqparallel::PartitionKind::kZigzag;
  bad.sp_chunk_tokens = -1;
  r = open_runtime(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sp_chunk_tokens"), std::string::npos) << r.status().to_string();
  bad.sp_chunk_tokens = 0;
  bad.model.device = "cuda:0";  // refused before the model loads, GPU or not
  r = open_runtime(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sequence parallelism runs on the CPU backend"), std::string::npos)
      << r.status().to_string();
  bad.model.device = "cpu";
  bad.sp_transport = static_cast<seqparallel::SpTransport>(9);
  r = open_runtime(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sp_transport"), std::string::npos) << r.status().to_string();
  bad.sp_transport = seqparallel::SpTransport::kHost;
  if (!seqparallel::nccl_available().ok()) {
    // Asked for NCCL where it cannot run: refused with the reason, no worker left waiting.
    bad.sp_transport = seqparallel::SpTransport::kNccl;
    r = open_runtime(bad);
    ASSERT_FALSE(r.ok());
    const std::string m = r.status().message();
    EXPECT_TRUE(m.find("NCCL") != std::string::npos || m.find("CUDA") != std::string::npos) << m;
    bad.sp_transport = seqparallel::SpTransport::kHost;
  }
  bad.sp_workers = 0;
  r = open_runtime(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sp_workers"), std::string::npos) << r.status().to_string();
  fs::remove_all(data1);
  fs::remove_all(data2);
}

// Admission sizes a sequence-parallel run by the exact share each worker holds
// (seqparallel::kv_blocks_per_worker): a long prompt whose tokens fill more than one worker's pool
// runs on the group when every worker's share fits, and is refused naming that share when one
// block is missing. The run at the exact size also exercises rank 0's reservation and the decode
// placement (a collective short of memory would fail the run).
TEST_F(ExecutorSpTest, LongPromptIsAdmittedByItsExactShareOfEachWorkersPool) {
  const std::string data = tmpdir("sp_share");
  const std::string lng = long_text(40);
  const int max_new = 24;
  const RunOutput ref = reference(data, lng, {max_new})[0];
  ASSERT_TRUE(ref.error.ok());
  const int prompt = ref.usage.prompt_tokens;
  seqparallel::SpSequence seq;
  seq.prompt_tokens = prompt;
  seq.decode_tokens = max_new;
  seq.workers = 2;
  seq.kind = seqparallel::PartitionKind::kZigzag;
  seq.block_size = 16;  // engine::ModelOptions' default
  const int64_t share = seqparallel::kv_blocks_per_worker(seq);
  const int64_t whole = (prompt + max_new + seq.block_size - 1) / seq.block_size + 1;  // one worker's need
  ASSERT_LT(share, whole - 2) << "the prompt must not fit one worker's pool of `share` blocks";
  const size_t block_bytes = 16 * 2 * 2 * (2 * 16) * sizeof(float);  // tokens x layers x K,V x kv_dim (fixture model)
  for (int64_t blocks : {share - 1, share}) {
    RuntimeOptions o = options(data);
    o.data_dir = "";
    o.model.kv_pool_bytes = static_cast<size_t>(blocks) * block_bytes;
    o.sp_workers = 2;
    o.sp_threshold_tokens = 256;
    o.kv_spill_dram_bytes = 0;  // no spill: a run beyond the pools is refused
    o.kv_spill_ssd = false;
    Runtime rt = open(o, false);
    RunOutput out = raw(*rt.executor, lng, max_new);
    const Status& got = out.error;
    const std::string what = "pool of " + std::to_string(blocks) + " blocks, share " + std::to_string(share);
    if (blocks < share) {
      EXPECT_EQ(got.code(), StatusCode::kInvalidArgument) << what << ": " << got.to_string();
      EXPECT_NE(got.message().find("needs " + std::to_string(share) + " KV blocks; the pool has " + std::to_string(blocks)),
                std::string::npos)
          << what << ": " << got.to_string();
    } else {
      ASSERT_TRUE(got.ok()) << what << ": " << got.to_string();
      EXPECT_EQ(out.usage.sp_workers, 2) << what;
      expect_same(out, ref, what);
    }
    close(rt);
  }
  fs::remove_all(data);
}

// A run whose KV exceeds the pool (the default configuration spills): on one worker (a group of
// rank 0 alone) and on two, its older KV leaves the pool for host memory or an SSD file between
// prefill steps and during decode, and the tokens and log-probabilities are those of one worker
// whose pool holds everything. With spilling off, the same run is refused naming the pool.
TEST_F(ExecutorSpTest, RunsBeyondThePoolSpillWithTheSameOutput) {
  const std::string data = tmpdir("sp_spill");
  const std::string lng = long_text(40);
  const int max_new = 24;
  const RunOutput ref = reference(data, lng, {max_new})[0];
  ASSERT_TRUE(ref.error.ok());
  EXPECT_EQ(ref.usage.kv_spilled_tokens, 0);
  const int prompt = ref.usage.prompt_tokens;
  const size_t block_bytes = 16 * 2 * 2 * (2 * 16) * sizeof(float);  // as above
  const size_t pool_blocks = static_cast<size_t>(prompt / 16 / 3);  // a third of the prompt per worker
  struct Tier {
    const char* name;
    size_t dram;
    bool ssd;
  };
  for (int workers : {1, 2}) {
    for (const Tier& t : {Tier{"memory", size_t{64} << 20, false}, Tier{"ssd", 0, true}, Tier{"off", 0, false}}) {
      RuntimeOptions o = options(data);
      o.model.kv_pool_bytes = pool_blocks * block_bytes;
      o.sp_workers = workers;
      o.sp_threshold_tokens = 1 << 20;  // only the spill sends it to the group
      o.kv_spill_dram_bytes = t.dram;
      o.kv_spill_ssd = t.ssd;
      o.kv_spill_chunk_tokens = 64;
      Runtime rt = open(o, false);
      const std::string what = std::to_string(workers) + " worker(s), spill to " + t.name;
      RunOutput out = raw(*rt.executor, lng, max_new);
      if (std::string(t.name) == "off") {
        EXPECT_EQ(out.error.code(), StatusCode::kInvalidArgument) << what << ": " << out.error.to_string();
        EXPECT_NE(out.error.message().find("raise kv_pool_bytes"), std::string::npos) << out.error.to_string();
      } else {
        ASSERT_TRUE(out.error.ok()) << what << ": " << out.error.to_string();
        EXPECT_EQ(out.usage.sp_workers, workers) << what;
        EXPECT_GT(out.usage.kv_spilled_tokens, prompt / workers / 3) << what;
        expect_same(out, ref, what);
        // The pool serves ordinary runs afterwards.
        RunOutput s = raw(*rt.executor, long_text(1), 8);
        EXPECT_TRUE(s.error.ok()) << what << ": " << s.error.to_string();
        EXPECT_EQ(s.usage.kv_spilled_tokens, 0) << what;
      }
      close(rt);
    }
  }
  fs::remove_all(data);
}

// A long-context run is cancelled between prefill steps: its progress shows in the stats while it
// prefills, cancel() stops it before any token (on one worker and on two), every pool block comes
// back, and the group serves the next run with the reference's output.
TEST_F(ExecutorSpTest, CancelMidPrefillFreesTheKvAndTheGroupServesOn) {
  const std::string data = tmpdir("sp_cancel");
  const std::string lng = long_text(40);
  const RunOutput ref = reference(data, lng, {8})[0];
  ASSERT_TRUE(ref.error.ok());
  for (int workers : {1, 2}) {
    RuntimeOptions o = options(data);
    o.data_dir = "";
    o.model.kv_pool_bytes = size_t{8} << 20;
    o.sp_workers = workers;
    o.sp_threshold_tokens = 64;  // two workers: long prompts go to the group
    o.sp_chunk_tokens = workers == 1 ? 0 : 4;
    o.kv_spill_chunk_tokens = 4;
    o.kv_spill_dram_bytes = 1;  // one worker: spills go to SSD at once
    o.kv_spill_ssd = true;
    if (workers == 1) o.model.kv_pool_bytes = 40 * 16 * 2 * 2 * 32 * sizeof(float);  // 40 blocks: the run spills
    Runtime rt = open(o, false);
    const std::string what = std::to_string(workers) + " worker(s)";
    RunRequest r;
    r.id = "long-" + std::to_string(workers);
    r.prompt = lng;
    r.sampling.max_tokens = 8;
    r.sampling.ignore_eos = true;
    RunOutput out;
    Collector c;
    ASSERT_TRUE(rt.executor->submit(r, c.sink(&out)).ok());
    // Wait for the prefill to be under way, then cancel.
    int64_t seen_done = 0, seen_total = 0;
    for (int i = 0; i < 20000 && seen_done == 0; ++i) {
      const ExecutorStats s = rt.executor->stats();
      seen_done = s.long_context.prefill_done;
      seen_total = s.long_context.prefill_total;
      if (seen_done == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    rt.executor->cancel(r.id);
    ASSERT_TRUE(c.wait(&out));
    EXPECT_GT(seen_done, 0) << what << ": no prefill progress seen";
    EXPECT_LT(seen_done, seen_total) << what;
    EXPECT_EQ(out.finish, "cancelled") << what;
    EXPECT_TRUE(out.tokens.empty()) << what;
    ExecutorStats after = rt.executor->stats();
    for (int i = 0; i < 2000 && after.pool_free_blocks != after.pool_blocks; ++i) {  // published at the next step
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      after = rt.executor->stats();
    }
    EXPECT_EQ(after.long_context.prefill_total, 0) << what;
    EXPECT_EQ(after.pool_free_blocks, after.pool_blocks) << what << ": the cancelled run's blocks are back";
    EXPECT_EQ(after.long_context.pool_used_blocks, 0) << what << ": rank 0's own pool is empty again";
    RunOutput again = raw(*rt.executor, lng, 8);
    ASSERT_TRUE(again.error.ok()) << what << ": " << again.error.to_string();
    EXPECT_EQ(again.usage.sp_workers, workers) << what;
    expect_same(again, ref, what + " (after a cancelled prefill)");
    close(rt);
  }
  fs::remove_all(data);
}

// A long run steps on the route's own thread (rank 0 is a sibling of the executor's model), beside
// the batch: while its client holds it inside its first token's event, short requests are answered
// — on one spilling worker and on a group of two; released, the long run ends with the reference's
// output and rank 0's pool is empty again. (When the route ran on the scheduler thread, the short
// request waited for the whole long run: here, for ever.)
TEST_F(ExecutorSpTest, ShortRequestsAreServedWhileALongRunIsOnTheRoute) {
  const std::string data = tmpdir("sp_beside");
  const std::string lng = long_text(40), shrt = long_text(1);
  const std::vector<RunOutput> refs = reference(data, lng, {8});
  const RunOutput& ref = refs[0];
  ASSERT_TRUE(ref.error.ok());
  for (int workers : {1, 2}) {
    RuntimeOptions o = options(data);
    o.data_dir = "";
    o.sp_workers = workers;
    o.sp_threshold_tokens = 64;  // two workers: long prompts go to the group
    o.kv_spill_dram_bytes = size_t{64} << 20;
    o.kv_spill_ssd = false;
    o.kv_spill_chunk_tokens = 32;
    if (workers == 1) o.model.kv_pool_bytes = 40 * 16 * 2 * 2 * 32 * sizeof(float);  // 40 blocks: the run spills
    Runtime rt = open(o, false);
    const std::string what = std::to_string(workers) + " worker(s)";
    struct Gate {
      std::mutex mu;
      std::condition_variable cv;
      bool holding = false, open = false;
      void release() {
        std::lock_guard<std::mutex> l(mu);
        open = true;
        cv.notify_all();
      }
      ~Gate() { release(); }
    } gate;
    RunOutput lout;
    Collector lc;
    EventSink inner = lc.sink(&lout);
    EventSink held = [&](const RunEvent& ev) {
      if (ev.kind == RunEvent::Kind::kToken) {
        std::unique_lock<std::mutex> l(gate.mu);
        gate.holding = true;
        gate.cv.notify_all();
        gate.cv.wait(l, [&] { return gate.open; });
      }
      return inner(ev);
    };
    RunRequest r;
    r.id = "long-beside-" + std::to_string(workers);
    r.prompt = lng;
    r.sampling.max_tokens = 8;
    r.sampling.ignore_eos = true;
    ASSERT_TRUE(rt.executor->submit(r, held).ok());
    {
      std::unique_lock<std::mutex> l(gate.mu);
      ASSERT_TRUE(gate.cv.wait_for(l, std::chrono::seconds(120), [&] { return gate.holding; })) << what;
    }
    RunOutput s = raw(*rt.executor, shrt, 8);  // answered while the long run is held
    ASSERT_TRUE(s.error.ok()) << what << ": " << s.error.to_string();
    EXPECT_EQ(s.tokens.size(), 8u) << what;
    EXPECT_EQ(s.usage.sp_workers, 0) << what << ": the short request ran in the batch";
    EXPECT_FALSE(lc.wait(&lout, 0)) << what << ": the long run is still held";
    gate.release();
    ASSERT_TRUE(lc.wait(&lout)) << what;
    ASSERT_TRUE(lout.error.ok()) << what << ": " << lout.error.to_string();
    EXPECT_EQ(lout.usage.sp_workers, workers) << what;
    if (workers == 1) EXPECT_GT(lout.usage.kv_spilled_tokens, 0) << what;
    expect_same(lout, ref, what + " (long run beside the batch)");
    EXPECT_EQ(rt.executor->stats().long_context.pool_used_blocks, 0) << what;
    close(rt);
  }
  fs::remove_all(data);
}

// Elastic degree: with kernel rates (here made up so that the choice turns on max_tokens: a slow
// link makes every decode step on two workers cost two all-gathers, fast dense work makes the
// prefill's halving worth less), the same prompt goes to two workers with few new tokens and to one
// with many; each gives the reference's output, the one-worker run leaves rank 1 idle, and the
// group takes the next run at the other degree. The expected degrees come from the same model
// (seqparallel::predict), and the setup must make them differ.
TEST_F(ExecutorSpTest, ElasticDegreeFollowsThePerformanceModel) {
  const std::string data = tmpdir("sp_elastic");
  const std::string lng = long_text(40);
  const std::vector<RunOutput> refs = reference(data, lng, {4, 40});
  const RunOutput &ref_few = refs[0], &ref_many = refs[1];
  ASSERT_TRUE(ref_few.error.ok() && ref_many.error.ok());
  const int prompt = ref_few.usage.prompt_tokens;
  seqparallel::KernelRates rates;
  rates.dense_tokens_per_s = 2000;
  rates.attn_pairs_per_s = 5e8;
  rates.masked_pairs_per_s = 5e8;
  rates.decode_dense_s = 1e-4;
  rates.kv_read_bytes_per_s = 1e10;
  // A slow link (the KV move of a shrink costs about 30 ms, more than 4 decode steps' all-gathers
  // save and less than 40's) and slow dense layers (two workers prefill sooner than one).
  rates.link_bytes_per_s = 1.64e7;
  rates.link_latency_s = 1e-3;
  rates.source = "made up for this test";
  // The fixture's model (executor_fixture.h: make_model), f32 KV.
  engine::ModelConfig cfg = engine::testing::tiny_config(engine::testing::Variant::kLlama);
  cfg.vocab_size = 512;
  cfg.max_position_embeddings = 2048;
  const double kv_layer = 2.0 * cfg.num_key_value_heads * cfg.head_dim * sizeof(float);
  // The plan the route must follow: the policy's (its choice is checked against a brute force in
  // test_sim, LongContextPolicy.PlanIsTheSoonestPredictedEndAmongDegreesThatFit), with this
  // group's shape; the run spills (the pool below), so every degree fits.
  LongContextPolicy pol;
  pol.workers = 2;
  pol.spills = true;
  pol.rates = rates;
  pol.model = cfg;
  pol.kv_bytes_per_token_layer = kv_layer;
  const LongContextPolicy::Plan few_plan = pol.plan(prompt, 4), many_plan = pol.plan(prompt, 40);
  ASSERT_TRUE(few_plan.prefill != many_plan.prefill || few_plan.decode != many_plan.decode)
      << "the made-up rates must make the choice turn on max_tokens: prompt " << prompt << ", plans " << few_plan.prefill
      << "->" << few_plan.decode << " and " << many_plan.prefill << "->" << many_plan.decode;
  ASSERT_TRUE(few_plan.decode < few_plan.prefill || many_plan.decode < many_plan.prefill)
      << "one of the runs must decode on fewer workers than it prefilled on";
  const std::string rates_file = data + "/rates.json";
  {
    std::ofstream f(rates_file);
    f << "{\"tokens\":1024,\"rates\":" << seqparallel::kernel_rates_json(rates) << ",\"plans\":[]}";
  }
  for (bool from_file : {false, true}) {
    RuntimeOptions o = options(data);
    o.data_dir = "";
    o.sp_workers = 2;
    o.sp_threshold_tokens = 256;
    // A pool that one worker cannot fill with the run: a one-worker run spills, so it stays on the route.
    o.model.kv_pool_bytes = static_cast<size_t>(prompt / 16 * 2 / 3) * 16 * 2 * 2 * 32 * sizeof(float);
    o.kv_spill_chunk_tokens = 128;
    if (from_file) {
      o.sp_rates_file = rates_file;
    } else {
      o.sp_rates = rates;
    }
    Runtime rt = open(o, false);
    const std::string what = from_file ? "rates from a file" : "rates in the options";
    for (int round = 0; round < 2; ++round) {
      RunOutput few = raw(*rt.executor, lng, 4), many = raw(*rt.executor, lng, 40);
      ASSERT_TRUE(few.error.ok()) << what << ": " << few.error.to_string();
      ASSERT_TRUE(many.error.ok()) << what << ": " << many.error.to_string();
      EXPECT_EQ(few.usage.sp_workers, few_plan.prefill) << what;
      EXPECT_EQ(few.usage.sp_decode_workers, few_plan.decode) << what;
      EXPECT_EQ(many.usage.sp_workers, many_plan.prefill) << what;
      EXPECT_EQ(many.usage.sp_decode_workers, many_plan.decode) << what;
      expect_same(few, ref_few, what + " (4 tokens)");
      expect_same(many, ref_many, what + " (40 tokens)");
    }
    EXPECT_EQ(rt.executor->stats().long_context.runs, 4u) << what;
    close(rt);
  }
  RuntimeOptions bad = options(data);
  bad.data_dir = "";
  bad.sp_workers = 2;
  bad.sp_rates_file = data + "/missing.json";
  auto r = open_runtime(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.json"), std::string::npos) << r.status().to_string();
  fs::remove_all(data);
}

}  // namespace
}  // namespace ragd::pipelines

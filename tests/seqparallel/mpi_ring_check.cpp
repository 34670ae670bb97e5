// Sequence parallelism over MPI, run by ctest under `mpiexec -np N`: every rank builds the same
// random model (same seed), computes the one-worker reference itself, then takes part in a
// zigzag ring prefill and 64 sharded greedy decode steps. Each rank checks the logits of its
// shard's prompt positions and of every decode step (kLogitTol) and the generated tokens; rank 0
// reports. Exit status 0 only when every rank passed.
//   mpi_ring_check [length] [decode steps] [partition] [decode ranks]
// With decode ranks D below the group's size, the sequence's KV moves to the first D ranks after
// the prefill (ShardedSequence::shrink) and only they decode.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ragd/seqparallel/mpi_communicator.h"
#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/ring_attention.h"
#include "ragd/seqparallel/sharded_sequence.h"
#include "sp_fixture.h"

using namespace ragd;               // NOLINT
using namespace ragd::seqparallel;  // NOLINT
using namespace ragd::seqparallel::testing;  // NOLINT

int main(int argc, char** argv) {
  auto comm_r = make_mpi_communicator(&argc, &argv);
  if (!comm_r.ok()) {
    std::fprintf(stderr, "mpi_ring_check: %s\n", comm_r.status().to_string().c_str());
    return 1;
  }
  Communicator& comm = *comm_r.value();
  const int length = argc > 1 ? std::atoi(argv[1]) : 3001;
  const int decode = argc > 2 ? std::atoi(argv[2]) : 64;
  const PartitionKind kind = parse_partition(argc > 3 ? argv[3] : "zigzag").value();
  const int decode_ranks = argc > 4 ? std::atoi(argv[4]) : comm.size();
  kernels::set_num_threads(1);
  const engine::ModelConfig cfg = sp_config(false);
  auto model = sp_model(cfg, 128u << 20);
  auto prompt = random_tokens(length, 17, cfg.vocab_size);
  const Reference ref = reference(*model, prompt, decode);

  // Prefill with every shard position's logits.
  auto shards = partition(length, comm.size(), kind).value();
  std::vector<int64_t> rows;
  for (auto& s : shards) rows.push_back(s.size());
  const Shard& mine = shards[comm.rank()];
  std::vector<int32_t> toks;
  for (int32_t p : mine.positions) toks.push_back(prompt[p]);
  engine::BlockTable table;
  engine::StepOutput out;
  StepTimes t;
  Status st = ring_prefill(*model, comm, rows, ShardInput{toks, mine.positions, engine::SeqStep::Logits::kAll}, &table,
                           &out, &t);
  double worst = 0.0;
  for (size_t i = 0; st.ok() && i < mine.positions.size(); ++i) {
    worst = std::max(worst, max_abs_diff(out.row(static_cast<int>(i)), ref.prompt_logits[mine.positions[i]]));
  }
  table.release(model->kv_pool());

  // Prefill + greedy decode through ShardedSequence.
  bool same_tokens = true;
  int64_t shard_tokens = 0;
  if (st.ok()) {
    ShardedSequence seq(*model, comm, kind);
    std::vector<float> logits;
    st = seq.prefill(prompt, &logits);
    if (st.ok()) worst = std::max(worst, max_abs_diff(logits, ref.prompt_logits.back()));
    if (st.ok() && decode_ranks < comm.size()) st = seq.shrink(decode_ranks);
    for (int i = 0; st.ok() && seq.holds_kv() && i < decode; ++i) {
      const int32_t next = argmax(logits);
      same_tokens = same_tokens && next == ref.generated[i];
      st = seq.decode(next, &logits);
      if (st.ok()) worst = std::max(worst, max_abs_diff(logits, ref.decode_logits[i]));
    }
    shard_tokens = seq.shard_tokens();
  }
  const int ok_here = st.ok() && same_tokens && worst <= kLogitTol ? 1 : 0;
  struct Report {
    double worst, seconds, wait;
    int64_t shard_tokens;
    int ok;
  } mine_r{worst, t.seconds, t.comm_wait_s, shard_tokens, ok_here}, all[64];
  if (comm.size() > 64 || !comm.allgather(&mine_r, sizeof mine_r, all).ok()) return 1;
  int ok = 1;
  int64_t total = 0;
  for (int r = 0; r < comm.size(); ++r) {
    ok &= all[r].ok;
    total += all[r].shard_tokens;
  }
  ok &= total == length + decode;
  if (comm.rank() == 0) {
    for (int r = 0; r < comm.size(); ++r) {
      std::printf("rank %d: max |logit diff| %.2e, prefill %.3f s (waiting %.3f s), shard %lld tokens%s\n", r,
                  all[r].worst, all[r].seconds, all[r].wait, static_cast<long long>(all[r].shard_tokens),
                  all[r].ok ? "" : "  FAILED");
    }
    std::printf("%s: %d ranks (%s), %d-token prompt, %d decode steps on %d ranks, %lld tokens of KV over all shards\n",
                ok ? "PASS" : "FAIL", comm.size(), std::string(partition_name(kind)).c_str(), length, decode,
                std::min(decode_ranks, comm.size()), static_cast<long long>(total));
  }
  if (!st.ok()) std::fprintf(stderr, "rank %d: %s\n", comm.rank(), st.to_string().c_str());
  return ok ? 0 : 1;
}

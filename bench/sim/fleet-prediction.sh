#!/usr/bin/env bash
# The llama3-8b fleet prediction of docs/benchmarks.md ("Fleet simulator"): a PREDICTION from the
# H200 kernel rates (bench/rates/h200-llama3-8b.json) and hand-entered serving figures
# (bench/sim/h200-serving.json), not a measurement. Workload: bench/sim/rag-zipf-1m.txt (1M documents,
# Zipf(0.9), two 512-token documents per question, 128 answer tokens). Per-replica sizing:
# bench/sim/h200-fleet.toml. Writes $OUT/*.txt (the printed summaries) and *.json / *.html.
#   bench/sim/fleet-prediction.sh [OUT]   (about 15 minutes on the 2-core build machine)
set -euo pipefail
OUT=${1:-/tmp/ragd-fleet-prediction}
mkdir -p "$OUT"
sim() { flock /tmp/ragd-build.lock build/bin/ragctl simulate --config bench/sim/h200-fleet.toml --rates bench/sim/h200-serving.json \
          --preset llama3-8b --workload bench/sim/rag-zipf-1m.txt --no-itl "$@"; }
# 1. Capacity at p99 TTFT <= 1 s: 1 / 4 / 16 replicas, without and with a shared 16 TiB Redis tier;
#    10 minutes of arrivals per point, the rate swept per replica (16..24 req/s per replica: one
#    replica saturates at about 22 req/s, its 128 running slots decoding at ~45 ms a step).
for n in 1 4 16; do
  for remote in 0 16TiB; do
    sim --replicas "$n" --set remote_bytes="$remote" --set duration_s=600 \
        --sweep "rate=$((16 * n))..$((24 * n)):$n" --slo-ttft-ms 1000 \
        --out "$OUT/capacity-$n-$remote.html" > "$OUT/capacity-$n-$remote.txt"
  done
done
# 2. Cache sizes: one hour at 16 req/s per replica. Hit rate against the HBM share of the pool (no
#    DRAM / SSD), against DRAM (pool cache full, no SSD), and against the shared Redis tier (16
#    replicas, pool + 64 GiB DRAM each, no SSD). The largest size of each sweep stands for
#    "unbounded": 90 % of its hit rate is the target.
sim --set rate=16 --set duration_s=3600 --set dram_cache_bytes=0 --set ssd_cache_bytes=0 \
    --sweep hbm_cache_bytes=6GiB..96GiB > "$OUT/size-hbm.txt"
sim --set rate=16 --set duration_s=3600 --set ssd_cache_bytes=0 \
    --sweep dram_cache_bytes=32GiB..8TiB > "$OUT/size-dram.txt"
sim --replicas 16 --set rate=256 --set duration_s=1800 --set dram_cache_bytes=64GiB --set ssd_cache_bytes=0 \
    --sweep remote_bytes=256GiB..64TiB > "$OUT/size-remote.txt"
echo "results in $OUT"

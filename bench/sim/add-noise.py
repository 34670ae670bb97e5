#!/usr/bin/env python3
"""Adds the per-request noise a seeded simulation draws (`ragctl simulate --replications N`) to a
rates file fitted earlier, from the same one-client calibration runs bench/sim/calibrate.py fits
on (calibrate.py --steps writes both itself):

  bench/sim/add-noise.py RATES.json BENCH_C1.json[,BENCH_C1.json...] > rates-noise.json

  network_quantiles     client TTFT less the daemon's, 21 quantiles (seconds)
  step_noise_quantiles  the misses' (nothing reused, >= 256 tokens) prefill time against a
                        least-squares line over their tokens, relative, 21 quantiles, mean 0
Each run's first (cold) request is left out, as in calibrate.py. Everything else is kept.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rates = json.load(open(sys.argv[1]))
    samples = calibrate.one_client_samples([json.load(open(p)) for p in sys.argv[2].split(",")])
    rates["serving"]["network_quantiles"] = calibrate.network_quantiles(samples)
    noise = calibrate.step_noise_quantiles(samples)
    if noise:
        rates["serving"]["step_noise_quantiles"] = noise
    json.dump(rates, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

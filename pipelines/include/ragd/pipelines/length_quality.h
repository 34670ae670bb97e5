// How well an output-length prediction ranks and sizes requests, measured against the true lengths
// (bench_srtf, `ragctl length-train`'s held-out report).
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

namespace ragd::pipelines {

// Kendall's tau-b between two equally long sequences (ties in either count as neither concordant
// nor discordant, and the denominator is corrected for them). O(n²). 0 for fewer than 2 pairs or
// when either sequence is constant.
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

// Fraction of requests whose predicted length falls in the same range as the true length, ranges
// (e_{k-1}, e_k] of the ascending upper edges `edges` plus one above the last.
double range_accuracy(const std::vector<double>& predicted, const std::vector<double>& actual, const std::vector<int>& edges);

// Mean absolute error in tokens.
double mean_abs_error(const std::vector<double>& predicted, const std::vector<double>& actual);

}  // namespace ragd::pipelines

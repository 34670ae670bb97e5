// How a corpus search finds candidates: by meaning (the embedder's vectors in the vector index),
// by words (BM25 in the lexical index), or both fused by reciprocal rank (hybrid, the default).
// Thread-safety: constant data.
#pragma once

#include <cstdint>

#include "ragd/common/enum_names.h"

namespace ragd::retrieval {

// kAuto: the next level's choice (a search: its corpus's mode; a corpus: its embedder's default,
// Corpus::default_mode()).
enum class RetrievalMode : uint8_t { kAuto, kHybrid, kLexical, kDense };
inline constexpr auto kRetrievalModeNames = make_enum_names<RetrievalMode>(
    "retriever mode", {{RetrievalMode::kAuto, "auto"},
                       {RetrievalMode::kHybrid, "hybrid"},
                       {RetrievalMode::kLexical, "lexical"},
                       {RetrievalMode::kDense, "dense"}});
constexpr const auto& ragd_enum_names(RetrievalMode) { return kRetrievalModeNames; }
static_assert(enum_names_valid(kRetrievalModeNames));

// How hybrid search merges its two lists (the first `candidates` of each):
//   weighted: a convex combination of the scores, lexical_share x (BM25 / the list's best BM25) +
//     (1 - lexical_share) x cosine; a chunk missing from a list counts that list's lowest score
//     there (the most it could have had and still be left out is about that). The default: on
//     the retrieval benchmark's selection split it ranked ahead of RRF (docs/benchmarks.md).
//   rrf: each list contributes weight / (rrf_k + rank) (rank from 1) per chunk (Cormack et al.'s
//     reciprocal rank fusion; k = 60 is their constant); the lexical list's weight lexical_weight.
enum class HybridFusion : uint8_t { kWeighted, kReciprocalRank };
inline constexpr auto kHybridFusionNames = make_enum_names<HybridFusion>(
    "hybrid fusion", {{HybridFusion::kWeighted, "weighted"}, {HybridFusion::kReciprocalRank, "rrf"}});
constexpr const auto& ragd_enum_names(HybridFusion) { return kHybridFusionNames; }
static_assert(enum_names_valid(kHybridFusionNames));

struct HybridOptions {
  HybridFusion fusion = HybridFusion::kWeighted;
  int candidates = 50;          // the dense list's length; at least the k asked for
  int lexical_candidates = 30;  // the lexical list's: its first 30 fused better than its first 50
  double lexical_share = 0.3;   // weighted: the lexical score's share, in [0, 1]
  int rrf_k = 60;               // rrf
  double lexical_weight = 1.0;  // rrf: weight of the lexical list's terms (1 = plain RRF)
};

// Document evidence in lexical and hybrid search: a chunk's score (BM25; in hybrid search its fused
// score, the lexical list entering the fusion as BM25 alone) is raised by `weight` times the scores
// of up to `chunks` other chunks of its document among the first `candidates` hits — a page with
// several passages on the question is more likely the one that answers it than a page with one
// stray match. Weight and count chosen on a held-out split of the retrieval benchmark (even
// question ids; docs/benchmarks.md), for each of the two rankings. weight 0 = off.
struct DocumentEvidence {
  double weight = 0.05;
  int chunks = 8;
  int candidates = 30;  // at least the k asked for
};

}  // namespace ragd::retrieval

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

// Hybrid fusion: each list contributes 1 / (rrf_k + rank) (rank from 1) per chunk, over the first
// `candidates` of each list (Cormack et al.'s reciprocal rank fusion; k = 60 is their constant).
struct HybridOptions {
  int candidates = 50;  // per list; at least the k asked for
  int rrf_k = 60;
  double lexical_weight = 1.0;  // weight of the lexical list's terms (1 = plain RRF)
};

// Document evidence in lexical search: a chunk's BM25 score is raised by `weight` times the scores
// of up to `chunks` other chunks of its document among the first `candidates` hits — a page with
// several passages on the question is more likely the one that answers it than a page with one
// stray match. Weight and count chosen on a held-out split of the retrieval benchmark (even
// question ids; docs/benchmarks.md). weight 0 = off.
struct DocumentEvidence {
  double weight = 0.05;
  int chunks = 8;
  int candidates = 30;  // at least the k asked for
};

}  // namespace ragd::retrieval

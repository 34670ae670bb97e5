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

}  // namespace ragd::retrieval

// Iterative RAG: retrieval again every `retrieval_interval` generated tokens, with the question and
// the last `query_window` generated tokens as the query; the retrieved passages become the context
// and the prompt is rebuilt as [context][question][generated so far] (in-context RAG). How search
// and decoding overlap (docs/design/iterative.md):
//   none         sequential: at each interval boundary the run waits for the search.
//   piperag      PipeRAG: the search for the next interval is issued at the start of the current
//                one with the query as it stands then (one interval stale) and runs while the run
//                decodes; its nprobe is chosen so that it fits in one interval's decode time.
//   speculative  RaLMSpec: the next context is taken at once from a per-run speculation cache
//                (seeded with the top `speculation_cache` hits of every real search, scored like
//                the index); every s boundaries the real searches run in one batch and the run
//                rolls back (tokens and KV) to the first boundary whose speculation was wrong. The
//                stride s adapts (OS3). Output is identical to `none`.
//   both         speculation as above, with each boundary's real search issued at once and
//                verified asynchronously while decoding goes on (PipeRAG's overlap applied to
//                RaLMSpec's verification). Output is identical to `none`.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"
#include "ragd/pipelines/param_range.h"

namespace ragd::pipelines {

enum class RetrievalOverlap : uint8_t { kNone, kPipeRag, kSpeculative, kBoth };
inline constexpr auto kRetrievalOverlapNames = make_enum_names<RetrievalOverlap>(
    "overlap", {{RetrievalOverlap::kNone, "none"},
                {RetrievalOverlap::kPipeRag, "piperag"},
                {RetrievalOverlap::kSpeculative, "speculative"},
                {RetrievalOverlap::kBoth, "both"}});
constexpr const auto& ragd_enum_names(RetrievalOverlap) { return kRetrievalOverlapNames; }
static_assert(enum_names_valid(kRetrievalOverlapNames));
inline std::string_view overlap_name(RetrievalOverlap o) { return enum_name(o); }
inline bool is_speculative(RetrievalOverlap o) {
  return o == RetrievalOverlap::kSpeculative || o == RetrievalOverlap::kBoth;
}
// The one parser of overlap names (pipeline specs, request bodies, ragctl). Header-only: the
// daemon's HTTP layer uses it without linking the pipelines library.
inline Result<RetrievalOverlap> parse_overlap(std::string_view s) { return parse_enum<RetrievalOverlap>(s); }

struct IterativeParams {
  int retrieval_interval = 16;  // generated tokens between retrievals; [1, 4096]
  int query_window = 16;        // last generated tokens joined to the question; [0, 4096]
  RetrievalOverlap overlap = RetrievalOverlap::kNone;
  int speculation_cache = 20;   // hits of every real search that seed the speculation cache; [1, 256]
  int max_stride = 8;           // speculative: most boundaries verified in one batch; both: most
                                // unverified boundaries in flight; [1, 64]
  int max_nprobe = 0;           // piperag: largest nprobe the search-time model may pick; 0 = the
                                // [retriever] nprobe
  // The query at a boundary is built from the text generated query_lag intervals earlier (0 = the
  // current text). 1 reproduces PipeRAG's staleness with sequential search (ablations, tests).
  int query_lag = 0;

  Status validate() const {
    auto range = [](const char* f, int v, int lo, int hi) {
      if (v >= lo && v <= hi) return Status::OK();
      return Status::InvalidArgument(std::string(f) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                     "], got " + std::to_string(v));
    };
    RAGD_RETURN_IF_ERROR(kRangeRetrievalInterval.check("retrieval_interval", retrieval_interval));
    RAGD_RETURN_IF_ERROR(range("query_window", query_window, 0, 4096));
    RAGD_RETURN_IF_ERROR(range("speculation_cache", speculation_cache, 1, 256));
    RAGD_RETURN_IF_ERROR(range("max_stride", max_stride, 1, 64));
    RAGD_RETURN_IF_ERROR(range("max_nprobe", max_nprobe, 0, 65536));
    return range("query_lag", query_lag, 0, 64);
  }
};

}  // namespace ragd::pipelines

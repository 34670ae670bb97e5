// Where speculative decoding's drafts come from (docs/api.md#speculative-decoding):
//   ngram  the run's own tokens (prompt lookup) and earlier answers of its scope (ngram_drafter.h)
//   draft  a small draft model sharing the serving model's tokenizer (model_drafter.h), named by
//          a directory the server loaded at start (runtime.speculative_draft_model or a pipeline's
//          [generation] speculative.draft_model)
// Header-only: the daemon's configuration and HTTP layer parse the names without linking pipelines.
#pragma once

#include <cstdint>
#include <string_view>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"

namespace ragd::pipelines {

enum class DraftMethod : uint8_t { kNgram, kDraft };
inline constexpr auto kDraftMethodNames =
    make_enum_names<DraftMethod>("speculative method", {{DraftMethod::kNgram, "ngram"}, {DraftMethod::kDraft, "draft"}});
constexpr const auto& ragd_enum_names(DraftMethod) { return kDraftMethodNames; }
static_assert(enum_names_valid(kDraftMethodNames));
inline std::string_view draft_method_name(DraftMethod m) { return enum_name(m); }
// InvalidArgument listing the names otherwise.
inline Result<DraftMethod> parse_draft_method(std::string_view s) { return parse_enum<DraftMethod>(s); }

}  // namespace ragd::pipelines

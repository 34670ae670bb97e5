// Private to the daemon: which top-level request fields the OpenAI completion routes take.
//
// Every field of a /v1/chat/completions or /v1/completions body is one of
//   implemented          parsed and honoured (parse_openai_request, parse_structured_output,
//                        parse_tools)
//   accepted, ignored    documented in docs/api.md with why it changes nothing here
//                        (user, store, metadata, service_tier)
// and anything else is a 400 naming it: "not implemented" for fields OpenAI or vLLM define that
// ragd does not honour (logit_bias, functions, ...), "unknown field" otherwise. vLLM's list of
// accepted fields was the guide. A field whose value is null is absent; an empty logit_bias asks
// for nothing and is accepted.
// Thread-safety: a pure function.
#pragma once

#include "json_fields.h"

namespace ragd::daemon {

ApiError check_request_fields(const Fields& f, bool chat);

}  // namespace ragd::daemon

// Private to the daemon: the question a chat asks a pipeline (the OpenAI routes' RAG runs).
//
// Rule: the last user message, preceded by the user messages of up to kRagQueryUserTurns - 1
// earlier user turns, oldest first, one per line. It is the pipeline's search query and its
// prompt's question (a pipeline prompt has one question slot and no history), so a follow-up whose
// referent is in an earlier turn ("How large was the reef there?") is searched and asked with it.
// Assistant turns are left out: they repeat the passages' words, not the user's subject.
// Measured on examples/qa_eval/multiturn.jsonl against the last message alone (docs/api.md,
// "Multi-turn retrieval"; bench/multiturn/run.sh).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "ragd/engine/tokenizer.h"

namespace ragd::daemon {

inline constexpr int kRagQueryUserTurns = 3;

// The query of `messages` by the rule above; "" when no user message has text.
std::string rag_query(const std::vector<engine::ChatMessage>& messages, int user_turns = kRagQueryUserTurns);

}  // namespace ragd::daemon

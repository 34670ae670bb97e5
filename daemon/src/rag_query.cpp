// The question a chat asks a pipeline (rag_query.h).
#include "rag_query.h"

#include <algorithm>

namespace ragd::daemon {

namespace {

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
}

}  // namespace

std::string rag_query(const std::vector<engine::ChatMessage>& messages, int user_turns) {
  std::vector<const std::string*> picked;  // newest first
  for (auto it = messages.rbegin(); it != messages.rend() && static_cast<int>(picked.size()) < user_turns; ++it) {
    if (it->role != "user" || blank(it->content)) continue;
    picked.push_back(&it->content);
  }
  std::string q;
  for (auto it = picked.rbegin(); it != picked.rend(); ++it) {
    if (!q.empty()) q += '\n';
    q += **it;
  }
  return q;
}

}  // namespace ragd::daemon

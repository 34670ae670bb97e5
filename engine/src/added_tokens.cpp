#include "added_tokens.h"

#include <fmt/format.h>

namespace ragd::engine {

Result<AddedToken> parse_added_token(simdjson::dom::element t, size_t i, int64_t max_id) {
  AddedToken at;
  int64_t id = -1;
  std::string_view content;
  if (t["id"].get_int64().get(id) != simdjson::SUCCESS || id < 0 || id > max_id)
    return Status::InvalidArgument(fmt::format("added_tokens[{}].id must be a non-negative integer", i));
  if (t["content"].get_string().get(content) != simdjson::SUCCESS || content.empty())
    return Status::InvalidArgument(fmt::format("added_tokens[{}].content must be a non-empty string", i));
  at.id = static_cast<int32_t>(id);
  at.content = std::string(content);
  bool b = false;
  if (t["special"].get_bool().get(b) == simdjson::SUCCESS) at.special = b;
  if (t["lstrip"].get_bool().get(b) == simdjson::SUCCESS) at.lstrip = b;
  if (t["rstrip"].get_bool().get(b) == simdjson::SUCCESS) at.rstrip = b;
  return at;
}

}  // namespace ragd::engine

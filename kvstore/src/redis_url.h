// Helpers shared by the Redis URL parser (redis_url.cpp) and the client's redirect parser
// (redis_client.cpp). Private to kvstore. Pure functions.
#pragma once

#include <string_view>

namespace ragd::kvstore::redis_detail {

// A whole decimal integer (no sign handling beyond from_chars', no trailing bytes).
bool parse_int(std::string_view s, long long& out);
// Without leading and trailing spaces and tabs.
std::string_view trim(std::string_view s);

}  // namespace ragd::kvstore::redis_detail

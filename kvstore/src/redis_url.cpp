// Redis URLs and the remote tier's options: pure parsing and validation, no hiredis, so that
// configuration checks (the daemon's --print-config, RuntimeOptions) link without the client.
#include "redis_url.h"

#include <charconv>
#include <string>

#include <fmt/format.h>

#include "ragd/kvstore/redis_client.h"

namespace ragd::kvstore {

namespace redis_detail {

bool parse_int(std::string_view s, long long& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace redis_detail

namespace {

using redis_detail::parse_int;
using redis_detail::trim;

Result<RedisEndpoint> parse_one_url(std::string_view entry) {
  std::string_view s = entry;
  if (const size_t p = s.find("://"); p != std::string_view::npos) {
    if (s.substr(0, p) != "redis") {
      return Status::InvalidArgument(fmt::format("redis url '{}': unsupported scheme '{}' (expected redis://)", entry, s.substr(0, p)));
    }
    s.remove_prefix(p + 3);
  }
  if (s.find('@') != std::string_view::npos) {
    return Status::InvalidArgument(fmt::format("redis url '{}': credentials are not supported in the url (kvstore.remote.password_file / username)", entry));
  }
  // A trailing "/" is tolerated; a database path is not (cluster mode has only database 0).
  if (!s.empty() && s.back() == '/') s.remove_suffix(1);
  RedisEndpoint ep;
  std::string_view port_str;
  if (!s.empty() && s.front() == '[') {  // [ipv6]:port
    const size_t close = s.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument(fmt::format("redis url '{}': unterminated '[' in host", entry));
    }
    ep.host = std::string(s.substr(1, close - 1));
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Status::InvalidArgument(fmt::format("redis url '{}': expected ':port' after ']'", entry));
      port_str = rest.substr(1);
      if (port_str.empty()) return Status::InvalidArgument(fmt::format("redis url '{}': empty port", entry));
    }
  } else {
    if (s.find('/') != std::string_view::npos) {
      return Status::InvalidArgument(fmt::format("redis url '{}': a path / database number is not supported", entry));
    }
    const size_t colon = s.rfind(':');
    if (colon != std::string_view::npos) {
      ep.host = std::string(s.substr(0, colon));
      port_str = s.substr(colon + 1);
      if (port_str.empty()) return Status::InvalidArgument(fmt::format("redis url '{}': empty port", entry));
      if (ep.host.find(':') != std::string::npos) {
        return Status::InvalidArgument(fmt::format("redis url '{}': an IPv6 host must be written as [addr]:port", entry));
      }
    } else {
      ep.host = std::string(s);
    }
  }
  if (ep.host.empty()) return Status::InvalidArgument(fmt::format("redis url '{}': empty host", entry));
  for (char c : ep.host) {
    if (c == ' ' || c == '/' || c == '?' || c == '#') {
      return Status::InvalidArgument(fmt::format("redis url '{}': invalid character '{}' in host", entry, c));
    }
  }
  if (!port_str.empty()) {
    long long port = 0;
    if (!parse_int(port_str, port)) {
      return Status::InvalidArgument(fmt::format("redis url '{}': port '{}' is not a number", entry, port_str));
    }
    if (port < 1 || port > 65535) {
      return Status::InvalidArgument(fmt::format("redis url '{}': port {} out of range 1..65535", entry, port));
    }
    ep.port = static_cast<int>(port);
  }
  return ep;
}

}  // namespace

std::string RedisEndpoint::to_string() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<std::vector<RedisEndpoint>> parse_redis_urls(std::string_view spec) {
  std::vector<RedisEndpoint> out;
  if (trim(spec).empty()) return Status::InvalidArgument("redis url: empty spec (expected redis://host:port[,...])");
  size_t pos = 0;
  while (true) {
    const size_t comma = spec.find(',', pos);
    std::string_view entry = trim(spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    if (entry.empty()) {
      return Status::InvalidArgument(fmt::format("redis url '{}': empty entry in the list", spec));
    }
    RAGD_ASSIGN_OR_RETURN(RedisEndpoint ep, parse_one_url(entry));
    out.push_back(std::move(ep));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace ragd::kvstore

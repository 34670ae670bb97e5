// TOML text to a table, with the error located as "<source>:<line>:<column>: <what>" (pipeline
// specs and adaptive profiles).
// Thread-safety: pure function.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "ragd/common/status.h"

namespace ragd::pipelines {

inline Result<toml::table> parse_toml(std::string_view text, std::string_view source_name) {
  try {
    return toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return Status::InvalidArgument(os.str());
  }
}

}  // namespace ragd::pipelines

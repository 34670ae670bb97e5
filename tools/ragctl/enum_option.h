// An enum-valued ragctl flag (--kv-dtype, --weights, ...): parsed while the command line is read,
// with the enum's one name table (enum_names.h), so a bad value stops ragctl before any work with
// the same choices-listing message the daemon's config gives. The default is whatever *out holds.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "ragd/common/enum_names.h"

namespace ragd::tools {

template <typename E>
CLI::Option* add_enum_option(CLI::App& app, const std::string& flag, E* out, const std::string& help) {
  return app.add_option_function<std::string>(
      flag,
      [out, flag](const std::string& s) {
        auto v = parse_enum<E>(s, flag);
        if (!v.ok()) throw CLI::ValidationError(v.status().message());
        *out = *v;
      },
      help + ": " + enum_choices<E>() + " (default " + std::string(enum_name(*out)) + ")");
}

}  // namespace ragd::tools

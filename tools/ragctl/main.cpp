// ragctl: the command-line client of ragd (model tools, ingestion, search, streaming, load
// generation). Subcommands register themselves (command.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <new>

#include <CLI/CLI.hpp>

#include "command.h"
#include "ragd/common/process.h"

namespace ragd::tools {
std::vector<Command>& commands() {
  static std::vector<Command> c;
  return c;
}
}  // namespace ragd::tools

int main(int argc, char** argv) {
  ragd::ensure_passive_omp_wait(argv);
  CLI::App app{"ragctl - client and tools for the ragd RAG serving daemon"};
  app.require_subcommand(1);
  auto& cmds = ragd::tools::commands();
  std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, ragd::tools::Action> actions;
  for (auto& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    actions[sub] = c.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, action] : actions) {
    if (!sub->parsed()) continue;
    // A command sizes its work first where it can (simulate refuses a workload that cannot fit);
    // an allocation that fails anyway ends the command with a message, not std::terminate.
    try {
      return action();
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "ragctl %s: out of memory\n", sub->get_name().c_str());
      return 2;
    }
  }
  return 2;
}

// ragctl subcommand registry. Each subcommand lives in its own file and registers itself:
//
//   static ragd::tools::Registration reg("make-model", "write a random-weight HF model directory",
//       [](CLI::App& sub) { /* add options */ return [=]() -> int { /* run */ return 0; }; });
//
// The setup function adds options to `sub` and returns the action to run when the subcommand is
// chosen. Thread-safety: registration happens during static initialisation only.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ragd::tools {

using Action = std::function<int()>;
using Setup = std::function<Action(CLI::App&)>;

struct Command {
  std::string name;
  std::string help;
  Setup setup;
};

std::vector<Command>& commands();

struct Registration {
  Registration(std::string name, std::string help, Setup setup) {
    commands().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

}  // namespace ragd::tools

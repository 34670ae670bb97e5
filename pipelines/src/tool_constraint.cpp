#include "tool_constraint.h"

#include <set>
#include <string>

namespace ragd::pipelines {

Result<std::shared_ptr<const engine::ConstraintSpec>> tool_constraint(const RunRequest& r, const engine::ToolCallFormat& f) {
  using Mode = ToolChoice::Mode;
  const ToolChoice& choice = r.tool_choice;
  if (r.tools.empty()) {
    if (choice.mode == Mode::kRequired || choice.mode == Mode::kFunction)
      return Status::InvalidArgument("tool_choice asks for a tool call, but the request has no tools");
    return std::shared_ptr<const engine::ConstraintSpec>();
  }
  if (!r.pipeline.empty())
    return Status::InvalidArgument("tools are not supported on pipeline runs (model '" + r.pipeline +
                                   "'): call tools with the base model, and retrieve in a pipeline run");
  if (r.messages.empty()) return Status::InvalidArgument("tools need a chat run (messages)");
  std::set<std::string> names;
  for (size_t i = 0; i < r.tools.size(); ++i) {
    const std::string& n = r.tools[i].name;
    if (!engine::valid_tool_name(n))
      return Status::InvalidArgument("tools[" + std::to_string(i) + "].function.name must match [A-Za-z0-9_-]{1,64}");
    if (!names.insert(n).second) return Status::InvalidArgument("tools[" + std::to_string(i) + "]: function '" + n + "' is given twice");
  }
  if (choice.mode == Mode::kNone) return std::shared_ptr<const engine::ConstraintSpec>();
  if (r.sampling.constraint)
    return Status::InvalidArgument("tools with response_format or guided_* are not supported: send tool_choice \"none\", or one of them");
  std::string tools = "[";
  size_t kept = 0;
  for (const engine::ToolDef& t : r.tools) {
    if (choice.mode == Mode::kFunction && t.name != choice.function) continue;
    tools += (kept++ ? ",{\"name\":\"" : "{\"name\":\"") + t.name + "\"";
    if (!t.parameters.empty()) tools += ",\"parameters\":" + t.parameters;
    tools += "}";
  }
  tools += "]";
  if (kept == 0) return Status::InvalidArgument("tool_choice names function '" + choice.function + "', which is not among the tools");
  const bool one = choice.mode == Mode::kFunction || !r.parallel_tool_calls;
  engine::ConstraintSpec spec;
  spec.kind = "tool_calls";
  spec.source = "{\"format\":\"" + f.name + "\",\"tools\":" + tools + ",\"min_calls\":1,\"max_calls\":" + (one ? "1" : "0") +
                ",\"text\":" + (choice.mode == Mode::kAuto ? "true" : "false") + "}";
  spec.origin = "tools";
  return std::make_shared<const engine::ConstraintSpec>(std::move(spec));
}

}  // namespace ragd::pipelines

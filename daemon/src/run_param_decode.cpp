// Run parameters decoded from a request body by the table (run_param_decode.h).
#include "run_param_decode.h"

#include <variant>

namespace ragd::daemon {

ApiError decode_run_params(const Fields& f, RunRoute route, pipelines::RunRequest* out) {
  using pipelines::ParamType;
  for (const pipelines::ParamDef& d : pipelines::run_param_defs()) {
    if (route == RunRoute::kOpenAi && d.openai_name.empty()) continue;
    const std::string name(route == RunRoute::kOpenAi ? d.openai_name : d.name);
    if (!f.has(name.c_str())) continue;
    pipelines::ParamValue value;
    bool present = false;
    switch (d.type) {
      case ParamType::kInt: {
        int64_t v = 0;
        if (auto e = f.integer(name.c_str(), &v, static_cast<int64_t>(d.range.lo), static_cast<int64_t>(d.range.hi), &present);
            e.failed())
          return e;
        value = v;
        break;
      }
      case ParamType::kNumber: {
        double v = 0;
        if (auto e = f.number(name.c_str(), &v, d.range.lo, d.range.hi, &present); e.failed()) return e;
        value = v;
        break;
      }
      case ParamType::kBool: {
        bool v = false;
        if (auto e = f.boolean(name.c_str(), &v, &present); e.failed()) return e;
        value = v;
        break;
      }
      case ParamType::kString:
      case ParamType::kEnum: {
        std::string v;
        if (auto e = f.str(name.c_str(), &v); e.failed()) return e;
        if (d.type == ParamType::kEnum && v.empty()) continue;  // "" = the default
        value = std::move(v);
        break;
      }
      case ParamType::kStringList: {
        std::vector<std::string> v;
        if (auto e = f.string_list(name.c_str(), &v); e.failed()) return e;
        value = std::move(v);
        break;
      }
      case ParamType::kObject: {
        auto el = f.get(name.c_str());
        if (!el || el->type() != simdjson::dom::element_type::OBJECT)
          return bad_request(name, "field '" + name + "' must be an object");
        value = simdjson::minify(*el);
        break;
      }
      case ParamType::kSeed: {
        uint64_t v = 0;
        if (auto e = f.seed(name.c_str(), &v, &present); e.failed()) return e;
        value = v;
        break;
      }
    }
    if (Status st = d.set(*out, value); !st.ok()) {
      // A value the row's own check refuses (e.g. cache_salt's length): its message names the field.
      if (d.type != ParamType::kEnum) return bad_request(name, std::string(st.message()));
      const std::string got = std::holds_alternative<std::string>(value) ? std::get<std::string>(value) : std::string();
      return bad_request(name, "field '" + name + "' must be one of " + d.choices() + "; got '" +
                                   clip_input(got) + "'");
    }
  }
  return {};
}

}  // namespace ragd::daemon

// Run parameters decoded from a request body by the table (run_param_decode.h).
#include "run_param_decode.h"

#include <climits>
#include <variant>

namespace ragd::daemon {

ApiError decode_run_params(const Fields& f, RunRoute route, pipelines::RunRequest* out) {
  using pipelines::ParamType;
  for (const pipelines::ParamDef& d : pipelines::run_param_defs()) {
    if (!d.on(route)) continue;
    const std::string name(d.name(route));
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
      case ParamType::kTokenIds: {
        auto el = f.get(name.c_str());
        simdjson::dom::array a;
        if (!el || el->get_array().get(a)) return bad_request(name, "field '" + name + "' must be an array of token ids");
        std::vector<int32_t> ids;
        for (auto t : a) {
          int64_t id = 0;
          if (t.get_int64().get(id) || id < 0 || id > INT32_MAX)
            return bad_request(name, "field '" + name + "' must be an array of token ids (integers >= 0)");
          ids.push_back(static_cast<int32_t>(id));
        }
        value = std::move(ids);
        break;
      }
      case ParamType::kSeed: {
        uint64_t v = 0;
        if (auto e = f.seed(name.c_str(), &v, &present); e.failed()) return e;
        value = v;
        break;
      }
    }
    // A value the row refuses (e.g. cache_salt's length, an enum name outside the choices): the
    // message names the field.
    if (Status st = pipelines::set_run_param(d, route, *out, value); !st.ok()) return bad_request(name, std::string(st.message()));
  }
  return {};
}

}  // namespace ragd::daemon

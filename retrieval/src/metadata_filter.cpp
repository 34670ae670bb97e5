#include "ragd/retrieval/metadata_filter.h"

#include <charconv>
#include <cmath>

#include <simdjson.h>

#include "ragd/common/echo.h"

namespace ragd::retrieval {

namespace {

// The canonical value of a JSON scalar; "" for other types.
std::string canonical_scalar(simdjson::dom::element e) {
  using T = simdjson::dom::element_type;
  switch (e.type()) {
    case T::STRING: {
      std::string_view s;
      if (e.get(s)) return "";
      return canonical_string(s);
    }
    case T::INT64: {
      int64_t v = 0;
      if (e.get(v)) return "";
      return canonical_number(static_cast<double>(v));
    }
    case T::UINT64: {
      uint64_t v = 0;
      if (e.get(v)) return "";
      return canonical_number(static_cast<double>(v));
    }
    case T::DOUBLE: {
      double v = 0;
      if (e.get(v)) return "";
      return canonical_number(v);
    }
    case T::BOOL: {
      bool v = false;
      if (e.get(v)) return "";
      return v ? "b:true" : "b:false";
    }
    default:
      return "";
  }
}

bool number_of(simdjson::dom::element e, double* out) {
  using T = simdjson::dom::element_type;
  const T t = e.type();
  if (t != T::INT64 && t != T::UINT64 && t != T::DOUBLE) return false;
  return !e.get_double().get(*out);
}

}  // namespace

std::string canonical_number(double v) {
  if (v == 0) v = 0;  // -0 and 0 are one value
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return "n:" + std::string(buf, r.ptr);
}

std::string canonical_string(std::string_view s) { return "s:" + std::string(s); }

std::vector<std::string> canonical_metadata_values(std::string_view json_value) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  if (parser.parse(json_value.data(), json_value.size(), true).get(e)) return out;
  simdjson::dom::array list;
  if (!e.get(list)) {
    for (auto item : list)
      if (std::string c = canonical_scalar(item); !c.empty()) out.push_back(std::move(c));
  } else if (std::string c = canonical_scalar(e); !c.empty()) {
    out.push_back(std::move(c));
  }
  return out;
}

Result<MetadataFilter> parse_metadata_filter(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(json.data(), json.size(), true).get(root); err)
    return Status::InvalidArgument(std::string("filter is not valid JSON: ") + simdjson::error_message(err));
  simdjson::dom::object obj;
  if (root.get(obj)) return Status::InvalidArgument("filter must be a JSON object of conditions, one per key");
  constexpr size_t kMaxConditions = 64;
  if (obj.size() > kMaxConditions)
    return Status::InvalidArgument("filter has more than " + std::to_string(kMaxConditions) + " keys");
  MetadataFilter f;
  for (auto field : obj) {
    const std::string key(field.key);
    const std::string where = "filter key '" + clip_input(key) + "'";
    if (key.empty()) return Status::InvalidArgument("filter has an empty key");
    MetadataCondition c;
    c.key = key;
    simdjson::dom::object ops;
    if (field.value.get(ops)) {
      // A bare scalar: equality.
      std::string v = canonical_scalar(field.value);
      if (v.empty()) return Status::InvalidArgument(where + ": a value must be a string, number, bool or an object of operators");
      c.values.push_back(std::move(v));
      f.all.push_back(std::move(c));
      continue;
    }
    if (ops.size() == 0) return Status::InvalidArgument(where + ": an empty object names no operator");
    bool has_set = false, has_range = false;
    for (auto op : ops) {
      const std::string_view name = op.key;
      if (name == "eq") {
        std::string v = canonical_scalar(op.value);
        if (v.empty()) return Status::InvalidArgument(where + ": 'eq' takes a string, number or bool");
        c.values.push_back(std::move(v));
        has_set = true;
      } else if (name == "in") {
        simdjson::dom::array list;
        if (op.value.get(list) || list.size() == 0)
          return Status::InvalidArgument(where + ": 'in' takes a non-empty list of strings, numbers or bools");
        for (auto item : list) {
          std::string v = canonical_scalar(item);
          if (v.empty()) return Status::InvalidArgument(where + ": 'in' takes a list of strings, numbers or bools");
          c.values.push_back(std::move(v));
        }
        has_set = true;
      } else if (name == "gt" || name == "gte" || name == "lt" || name == "lte") {
        double v = 0;
        if (!number_of(op.value, &v) || !std::isfinite(v))
          return Status::InvalidArgument(where + ": '" + std::string(name) + "' takes a number");
        (name == "gt" ? c.gt : name == "gte" ? c.gte : name == "lt" ? c.lt : c.lte) = v;
        has_range = true;
      } else {
        return Status::InvalidArgument(where + ": unknown operator '" + clip_input(name) +
                                       "' (known: eq, in, gt, gte, lt, lte)");
      }
    }
    if (has_set && has_range)
      return Status::InvalidArgument(where + ": a condition is either eq / in or a range (gt, gte, lt, lte), not both");
    if (has_set && c.values.size() > 1 && ops.size() > 1)
      return Status::InvalidArgument(where + ": give either 'eq' or 'in', not both");
    c.op = has_range ? MetadataCondition::Op::kRange : MetadataCondition::Op::kIn;
    f.all.push_back(std::move(c));
  }
  return f;
}

}  // namespace ragd::retrieval

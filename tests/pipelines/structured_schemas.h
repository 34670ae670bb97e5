// Schemas, patterns and choice lists for the structured-output property test: hand-written ones in
// the shapes applications send (answers with citations, records, enums, dates, nested arrays),
// and random ones from a seeded generator (nested objects, bounded arrays, enums, anyOf / oneOf,
// integer and number ranges, string formats and patterns). Every generated schema bounds its
// output (strings have a maxLength or a fixed format, arrays a maxItems, nesting is at most 3).
#pragma once

#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

namespace ragd::pipelines::testing {

inline std::vector<std::string> handwritten_schemas() {
  return {
      R"({"type":"object","properties":{"answer":{"type":"string","maxLength":40},"citations":{"type":"array","items":{"type":"integer","minimum":1,"maximum":4},"minItems":1,"maxItems":3}},"required":["answer","citations"],"additionalProperties":false})",
      R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":12},"age":{"type":"integer","minimum":0,"maximum":130},"email":{"type":"string","format":"email"}},"required":["name","age"]})",
      R"({"type":"object","properties":{"sentiment":{"enum":["positive","negative","neutral"]},"confidence":{"type":"number","minimum":0,"maximum":1}},"required":["sentiment","confidence"]})",
      R"({"type":"array","items":{"type":"object","properties":{"date":{"type":"string","format":"date"},"amount":{"type":"number","exclusiveMinimum":0,"maximum":10000}},"required":["date","amount"],"additionalProperties":false},"minItems":1,"maxItems":3})",
      R"({"type":"object","properties":{"id":{"type":"string","format":"uuid"},"ip":{"type":"string","format":"ipv4"},"when":{"type":"string","format":"date-time"}},"required":["id","ip","when"]})",
      R"({"anyOf":[{"type":"string","maxLength":8},{"type":"integer","minimum":-50,"maximum":50},{"type":"null"}]})",
      R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number","minimum":0,"maximum":100}},"required":["kind","r"]},{"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"integer","minimum":1,"maximum":9},"h":{"type":"integer","minimum":1,"maximum":9}},"required":["kind","w","h"]}]})",
      R"({"$defs":{"node":{"type":"object","properties":{"label":{"type":"string","maxLength":5},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["label"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
      R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2,4}$"},"ok":{"type":"boolean"},"note":{"type":["string","null"],"maxLength":10}},"required":["code","ok","note"]})",
      R"({"type":"object","properties":{"matrix":{"type":"array","items":{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":2,"maxItems":2},"minItems":2,"maxItems":2}},"required":["matrix"]})",
      R"({"type":"object","properties":{"scores":{"type":"array","items":{"type":"integer","minimum":0,"maximum":99},"maxItems":4}},"required":["scores"],"additionalProperties":false})",
      R"({"type":"object","properties":{"title":{"type":"string","maxLength":20,"description":"a title"},"year":{"type":"integer","minimum":1900,"maximum":2030,"default":2000},"genres":{"type":"array","items":{"enum":["drama","comedy","noir"]},"maxItems":3}},"required":["title","year"],"title":"Movie"})",
      R"({"type":"object","properties":{"t":{"type":"string","format":"time"},"d":{"type":"string","format":"date"}},"required":["t"]})",
      R"({"enum":[1,"two",[3],{"four":4},null,true]})",
      R"({"type":"object","properties":{"x":{"type":"number","minimum":-2.5,"maximum":2.5},"y":{"type":"number","exclusiveMinimum":-1,"exclusiveMaximum":1}},"required":["x","y"],"additionalProperties":false})",
  };
}

// A random schema; `depth` limits nesting. Property names, enum values and patterns come from small
// fixed lists so that schemas are varied but readable.
class SchemaGenerator {
 public:
  explicit SchemaGenerator(uint64_t seed) : rng_(seed) {}

  std::string schema(int depth = 0) {
    const int kind = pick(depth >= 2 ? 9 : 11);
    switch (kind) {
      case 0: return string_schema();
      case 1: return integer_schema();
      case 2: return number_schema();
      case 3: return R"({"type":"boolean"})";
      case 4: return enum_schema();
      case 5: return format_schema();
      case 6: return fmt::format(R"({{"anyOf":[{},{}]}})", scalar(), scalar());
      case 7: return one_of();
      case 8: return fmt::format(R"({{"type":["{}","null"],"maxLength":{}}})", "string", 1 + pick(6));
      case 9: return object_schema(depth);
      default: return array_schema(depth);
    }
  }

  std::string top() { return pick(3) == 0 ? array_schema(0) : object_schema(0); }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  std::string scalar() {
    switch (pick(5)) {
      case 0: return string_schema();
      case 1: return integer_schema();
      case 2: return number_schema();
      case 3: return enum_schema();
      default: return R"({"type":"null"})";
    }
  }
  std::string string_schema() {
    const int lo = pick(3), hi = lo + pick(10);
    static const char* patterns[] = {"^[a-z]{2,5}$", "^[A-Z][a-z]{0,6}$", "^(yes|no|maybe)$", "^[0-9]{3}-[0-9]{3}$",
                                     "^x+y?$", "^[a-f0-9]{4,8}$"};
    if (pick(4) == 0) return fmt::format(R"({{"type":"string","pattern":"{}"}})", patterns[pick(6)]);
    return fmt::format(R"({{"type":"string","minLength":{},"maxLength":{}}})", lo, hi);
  }
  std::string integer_schema() {
    const int lo = pick(2000) - 1000, hi = lo + pick(3000);
    switch (pick(4)) {
      case 0: return fmt::format(R"({{"type":"integer","minimum":{},"maximum":{}}})", lo, hi);
      case 1: return fmt::format(R"({{"type":"integer","exclusiveMinimum":{},"exclusiveMaximum":{}}})", lo, hi + 2);
      case 2: return fmt::format(R"({{"type":"integer","minimum":{}}})", lo);
      default: return fmt::format(R"({{"type":"integer","maximum":{}}})", hi);
    }
  }
  std::string number_schema() {
    const double lo = (pick(400) - 200) / 4.0, hi = lo + 2 + pick(400) / 4.0;
    switch (pick(3)) {
      case 0: return fmt::format(R"({{"type":"number","minimum":{},"maximum":{}}})", lo, hi);
      case 1: return fmt::format(R"({{"type":"number","exclusiveMinimum":{},"exclusiveMaximum":{}}})", lo, hi);
      default: return R"({"type":"number"})";
    }
  }
  std::string enum_schema() {
    static const char* values[] = {"\"red\"", "\"green\"", "\"blue\"", "1", "2.5", "null", "true", "\"a b\"", "\"é\"", "[1,2]"};
    std::string out;
    const int n = 1 + pick(4);
    std::vector<int> used;
    for (int k = 0; k < n; ++k) {
      const int v = pick(10);
      if (std::find(used.begin(), used.end(), v) != used.end()) continue;
      used.push_back(v);
      out += (out.empty() ? "" : ",") + std::string(values[v]);
    }
    return pick(5) == 0 ? fmt::format(R"({{"const":{}}})", values[used[0]]) : fmt::format(R"({{"enum":[{}]}})", out);
  }
  std::string format_schema() {
    static const char* formats[] = {"date", "uuid", "email", "ipv4", "date-time", "time"};
    return fmt::format(R"({{"type":"string","format":"{}"}})", formats[pick(6)]);
  }
  std::string one_of() {
    // Branches that differ in type, or objects told apart by a const discriminator.
    if (pick(2) == 0)
      return fmt::format(R"({{"oneOf":[{},{},{{"type":"boolean"}}]}})", string_schema(), integer_schema());
    return fmt::format(
        R"({{"oneOf":[{{"type":"object","properties":{{"t":{{"const":"a"}},"v":{}}},"required":["t","v"]}},{{"type":"object","properties":{{"t":{{"const":"b"}},"w":{}}},"required":["t"]}}]}})",
        scalar(), scalar());
  }
  std::string object_schema(int depth) {
    static const char* names[] = {"id", "name", "value", "items", "meta", "score", "tags", "when", "kind", "note", "x"};
    const int n = 1 + pick(4);
    std::string props, req;
    std::vector<int> used;
    for (int k = 0; k < n; ++k) {
      const int p = pick(11);
      if (std::find(used.begin(), used.end(), p) != used.end()) continue;
      used.push_back(p);
      props += fmt::format(R"({}"{}":{})", props.empty() ? "" : ",", names[p], schema(depth + 1));
      if (pick(2) == 0) req += fmt::format(R"({}"{}")", req.empty() ? "" : ",", names[p]);
    }
    return fmt::format(R"({{"type":"object","properties":{{{}}},"required":[{}]{}}})", props, req,
                       pick(2) == 0 ? R"(,"additionalProperties":false)" : "");
  }
  std::string array_schema(int depth) {
    const int lo = pick(3), hi = lo + pick(4);
    return fmt::format(R"({{"type":"array","items":{},"minItems":{},"maxItems":{}}})", schema(depth + 1), lo, hi);
  }

  std::mt19937_64 rng_;
};

inline std::vector<std::string> handwritten_patterns() {
  return {"[a-z]{3,8}",        "\\d{3}-\\d{4}",        "(yes|no)",          "[A-Z][a-z]+ [A-Z][a-z]+",  "0x[0-9a-f]{2,6}",
          "(ab|cd){1,6}e?",        "\\w{1,12}@\\w{1,12}\\.(com|org)", "[^,\\n]{1,10}",     "colou?r",                  "-?\\d{1,6}(\\.\\d{1,2})?",
          "é{1,3}[α-γ]",        "(\\d{2}:){2}\\d{2}",    "[01]{8}",           "(?:red|green|blue)-\\d",   "\\s?[xyz]{2}\\S",
          "a{2,8}b{0,3}",       "[.]{3}!",              "\\(\\d\\)",         "(?P<w>[a-c]{2})-(?:\\d)",  "[\\w\\-]{4}"};
}

inline std::vector<std::vector<std::string>> handwritten_choices() {
  return {{"yes", "no"}, {"positive", "negative", "neutral"}, {"A", "B", "C", "D"}, {"true", "tree", "trust"},
          {"München", "Zürich", "Kraków"}, {"1", "12", "123"}, {"the answer is 42", "the answer is unknown"}};
}

}  // namespace ragd::pipelines::testing

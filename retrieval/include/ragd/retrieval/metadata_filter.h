// Metadata filters: which documents a search may return, by their metadata and their file-derived
// fields, applied inside both searches (lexical_index.h: boolean terms in the Xapian match; the
// vector search: an IdFilter over the chunks those terms select), so a filtered top-k is the k
// best of the matching chunks, never fewer when k of them exist.
//
// JSON form (run bodies' and the OpenAI routes' "filter", `ragctl search --filter`): an object,
// each key one condition, all of them required (AND):
//   {"lang": "en"}                      equality with a string, number or bool
//   {"tags": {"in": ["a", "b"]}}        one of these values
//   {"year": {"gte": 2020, "lt": 2025}} a numeric range: any of gt, gte, lt, lte
//   {"draft": {"eq": false}}            equality, spelled out
// A metadata value that is a list matches when any element does. Numbers compare as numbers
// (2021 equals 2021.0), never as strings ("2021" does not equal 2021). Besides a document's own
// metadata keys, the fields `format` ("html", "pdf", ...), `page` (PDF pages) and `path` (the
// document's source) filter the same way; a metadata key of the same name adds its values.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::retrieval {

struct MetadataCondition {
  enum class Op { kIn, kRange };  // kIn with one value is equality
  std::string key;
  Op op = Op::kIn;
  std::vector<std::string> values;  // kIn: canonical values (canonical_metadata_values)
  std::optional<double> gt, gte, lt, lte;  // kRange
  // Whether a number satisfies the range.
  bool in_range(double v) const {
    return (!gt || v > *gt) && (!gte || v >= *gte) && (!lt || v < *lt) && (!lte || v <= *lte);
  }
};

struct MetadataFilter {
  std::vector<MetadataCondition> all;  // every one must hold; empty = no filter
  bool empty() const { return all.empty(); }
};

// Parses the JSON form above; InvalidArgument naming the key and the problem ("filter key 'year':
// unknown operator 'gteq' (known: eq, in, gt, gte, lt, lte)").
Result<MetadataFilter> parse_metadata_filter(std::string_view json);

// The canonical values of one metadata value given as JSON text (a document's Document::metadata
// value): "s:" + a string, "n:" + a number in its shortest round-trip form, "b:true" / "b:false";
// a list gives each element's. Malformed JSON or other types give none.
std::vector<std::string> canonical_metadata_values(std::string_view json_value);

// The canonical value of a number, of a string ("s:" + it) and of a page / bool, for the
// file-derived fields.
std::string canonical_number(double v);
std::string canonical_string(std::string_view s);

}  // namespace ragd::retrieval

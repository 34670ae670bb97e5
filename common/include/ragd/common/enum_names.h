// Enum <-> name: the one facility behind every name a user or a file gives for an enum value
// (config keys, pipeline specs, request fields, CLI flags) and every name ragd prints back.
//
// Each enum declares, next to itself, one constexpr table and an ADL hook that returns it:
//
//   enum class KvDtype : uint8_t { kF32 = 0, kBF16 = 2, kInt8 = 3 };
//   inline constexpr auto kKvDtypeNames = make_enum_names<KvDtype>(
//       "kv_dtype", {{KvDtype::kF32, "f32"}, {KvDtype::kBF16, "bf16"}, {KvDtype::kInt8, "int8"}});
//   constexpr const auto& ragd_enum_names(KvDtype) { return kKvDtypeNames; }
//
// and then everything is generic: enum_name(v), parse_enum<E>(s), enum_choices<E>(),
// enum_values<E>(). The first entry of a value is its canonical name (printed, listed as a choice);
// later entries of the same value are accepted aliases. Header-only and constexpr, so a module
// that only includes another module's public header (the daemon's config checks) parses exactly
// as that module does without linking it.
//
// Parse errors are InvalidArgument: "kv_dtype must be one of f32 | bf16 | int8; got 'fp8'" (the
// subject is the table's, or the caller's, e.g. the config key "runtime.kv_dtype").
// Thread-safety: constant data and pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"

namespace ragd {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E, size_t N>
struct EnumNames {
  std::string_view what;  // the setting these name, in errors: "kv_dtype", "scheduler"
  std::array<EnumName<E>, N> entries;
};

template <typename E, size_t N>
constexpr EnumNames<E, N> make_enum_names(std::string_view what, const EnumName<E> (&entries)[N]) {
  EnumNames<E, N> t{what, {}};
  for (size_t i = 0; i < N; ++i) t.entries[i] = entries[i];
  return t;
}

namespace enum_names_detail {
template <typename E>
constexpr const auto& table() {
  return ragd_enum_names(E{});  // found by ADL in E's namespace
}
// True when entries[i] is the first entry of its value (its canonical name).
template <typename T>
constexpr bool canonical(const T& t, size_t i) {
  for (size_t j = 0; j < i; ++j)
    if (t.entries[j].value == t.entries[i].value) return false;
  return true;
}
}  // namespace enum_names_detail

// Names must be unique (a value may have several). Tables check themselves with
// static_assert(enum_names_valid(kTable)).
template <typename E, size_t N>
constexpr bool enum_names_valid(const EnumNames<E, N>& t) {
  for (size_t i = 0; i < N; ++i) {
    if (t.entries[i].name.empty()) return false;
    for (size_t j = 0; j < i; ++j)
      if (t.entries[j].name == t.entries[i].name) return false;
  }
  return N > 0 && !t.what.empty();
}

// Lookups in a given table (an enum with a second spelling, e.g. a model's HF class name and its
// model_type, keeps the second one as another table).
template <typename E, size_t N>
constexpr std::string_view enum_name_in(const EnumNames<E, N>& t, E v) {
  for (const auto& e : t.entries)
    if (e.value == v) return e.name;
  return "?";
}
template <typename E, size_t N>
constexpr std::optional<E> enum_from_name_in(const EnumNames<E, N>& t, std::string_view s) {
  for (const auto& e : t.entries)
    if (e.name == s) return e.value;
  return std::nullopt;
}

// The canonical name of v; "?" for a value outside the table (a cast from a bad integer).
template <typename E>
constexpr std::string_view enum_name(E v) {
  return enum_name_in(enum_names_detail::table<E>(), v);
}

// The value a name (canonical or alias) stands for; nullopt when none.
template <typename E>
constexpr std::optional<E> enum_from_name(std::string_view s) {
  return enum_from_name_in(enum_names_detail::table<E>(), s);
}

// True when v is a value of the table (e.g. a code read from disk, cast to E).
template <typename E>
constexpr bool enum_known(E v) {
  for (const auto& e : enum_names_detail::table<E>().entries)
    if (e.value == v) return true;
  return false;
}

// Every value once, in table order.
template <typename E>
std::vector<E> enum_values() {
  const auto& t = enum_names_detail::table<E>();
  std::vector<E> out;
  for (size_t i = 0; i < t.entries.size(); ++i)
    if (enum_names_detail::canonical(t, i)) out.push_back(t.entries[i].value);
  return out;
}

// The canonical names joined: "f32 | bf16 | int8".
template <typename E>
std::string enum_choices(std::string_view sep = " | ") {
  const auto& t = enum_names_detail::table<E>();
  std::string out;
  for (size_t i = 0; i < t.entries.size(); ++i) {
    if (!enum_names_detail::canonical(t, i)) continue;
    if (!out.empty()) out += sep;
    out += t.entries[i].name;
  }
  return out;
}

// The table's subject ("kv_dtype").
template <typename E>
constexpr std::string_view enum_what() {
  return enum_names_detail::table<E>().what;
}

// "<what> must be one of a | b | c; got '<s>'" (s clipped to 64 bytes). what = "" uses the table's.
template <typename E>
Status enum_parse_error(std::string_view s, std::string_view what = {}) {
  std::string got(s.substr(0, 64));
  if (s.size() > 64) got += "...";
  return Status::InvalidArgument(std::string(what.empty() ? enum_what<E>() : what) + " must be one of " + enum_choices<E>() +
                                 "; got '" + got + "'");
}

// The value of a name; InvalidArgument (enum_parse_error) otherwise.
template <typename E>
Result<E> parse_enum(std::string_view s, std::string_view what = {}) {
  if (auto v = enum_from_name<E>(s)) return *v;
  return enum_parse_error<E>(s, what);
}

}  // namespace ragd

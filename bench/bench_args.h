// Command-line flags of the benchmarks: each flag is bound to a typed variable that holds its
// default, and parse() fills them from `--name value` pairs (and value-less switches). An unknown
// flag, a missing value or a value that does not parse is an error that names the flag; the usage
// line is built from the flags and their defaults.
//
//   BenchArgs args("bench_linear");
//   args.opt("threads", &threads).list("rows", &rows).opt("reps", &reps).flag("quick", &quick);
//   if (!args.parse(argc, argv)) return 2;
//
// Header-only, benchmark support. Thread-safety: one thread.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace ragd::bench {

namespace args_detail {

// Whole-string parses; false on anything left over, out of range or empty.
inline bool parse_value(const std::string& s, std::string* out) {
  *out = s;
  return true;
}

template <typename T>
  requires std::is_integral_v<T>
bool parse_value(const std::string& s, T* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  if constexpr (std::is_signed_v<T>) {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(v);
  } else {
    if (s[0] == '-') return false;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(v);
  }
  return true;
}

inline bool parse_value(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

inline std::string show(const std::string& v) { return v.empty() ? "VALUE" : v; }
template <typename T>
  requires std::is_arithmetic_v<T>
std::string show(T v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
template <typename T>
std::string show(const std::vector<T>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + show(v[i]);
  return s.empty() ? "A,B" : s;
}

}  // namespace args_detail

class BenchArgs {
 public:
  // `program` starts each error and the usage line.
  explicit BenchArgs(std::string program) : program_(std::move(program)) {}

  // --name VALUE into *v (std::string, an integer type or double); its current value is the default,
  // shown in the usage line unless `shown` is given.
  template <typename T>
  BenchArgs& opt(const std::string& name, T* v, const std::string& shown = "") {
    return add(name, shown.empty() ? args_detail::show(*v) : shown, true,
               [v](const std::string& s) { return args_detail::parse_value(s, v) ? "" : bad_value(s); });
  }

  // --name A,B,C: a comma-separated list replacing *v.
  template <typename T>
  BenchArgs& list(const std::string& name, std::vector<T>* v) {
    return add(name, args_detail::show(*v), true, [v](const std::string& s) {
      std::vector<T> out;
      std::stringstream ss(s);
      for (std::string item; std::getline(ss, item, ',');) {
        T x{};
        if (!args_detail::parse_value(item, &x)) return bad_value(item);
        out.push_back(x);
      }
      *v = std::move(out);
      return std::string();
    });
  }

  // --name VALUE, repeatable: each occurrence appended to *v.
  BenchArgs& each(const std::string& name, std::vector<std::string>* v) {
    return add(name, "VALUE", true, [v](const std::string& s) {
      v->push_back(s);
      return std::string();
    });
  }

  // --name, no value: sets *v to `value`.
  BenchArgs& flag(const std::string& name, bool* v, bool value = true) {
    return add(name, "", false, [v, value](const std::string&) {
      *v = value;
      return std::string();
    });
  }

  // --name VALUE handed to `set`, which returns "" or what is wrong with the value.
  BenchArgs& custom(const std::string& name, const std::string& shown, std::function<std::string(const std::string&)> set) {
    return add(name, shown, true, std::move(set));
  }

  // Parses argv[1..]. On an unknown flag, a flag without its value or a value that does not parse:
  // prints "<program>: <what>" and the usage line to stderr and returns false.
  [[nodiscard]] bool parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const Flag* f = a.rfind("--", 0) == 0 ? find(a.substr(2)) : nullptr;
      if (f == nullptr) return fail("unknown flag '" + a + "'");
      given_.insert(f->name);
      if (!f->takes_value) {
        f->set("");
        continue;
      }
      if (i + 1 >= argc) return fail("flag " + a + " needs a value");
      if (const std::string e = f->set(argv[++i]); !e.empty()) return fail(a + ": " + e);
    }
    return true;
  }

  // Whether parse() saw --name.
  bool given(const std::string& name) const { return given_.count(name) > 0; }

  // "usage: PROGRAM [--name DEFAULT] [--switch] ...".
  std::string usage() const {
    std::string u = "usage: " + program_;
    for (const Flag& f : flags_) u += " [--" + f.name + (f.takes_value ? " " + f.shown : "") + "]";
    return u;
  }

 private:
  struct Flag {
    std::string name, shown;
    bool takes_value = true;
    std::function<std::string(const std::string&)> set;  // "" or what is wrong with the value
  };

  static std::string bad_value(const std::string& s) { return "bad value '" + s + "'"; }

  BenchArgs& add(const std::string& name, std::string shown, bool takes_value, std::function<std::string(const std::string&)> set) {
    flags_.push_back({name, std::move(shown), takes_value, std::move(set)});
    return *this;
  }
  const Flag* find(const std::string& name) const {
    for (const Flag& f : flags_)
      if (f.name == name) return &f;
    return nullptr;
  }
  bool fail(const std::string& what) const {
    std::fprintf(stderr, "%s: %s\n%s\n", program_.c_str(), what.c_str(), usage().c_str());
    return false;
  }

  std::string program_;
  std::vector<Flag> flags_;
  std::set<std::string> given_;
};

}  // namespace ragd::bench

#include "ragd/kernels/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace ragd::kernels {

namespace {

CpuLevel detect() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (!avx2) return CpuLevel::kGeneric;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return avx512 ? CpuLevel::kAvx512 : CpuLevel::kAvx2;
}

CpuLevel capped() {
  CpuLevel l = supported_cpu_level();
  if (const char* env = std::getenv("RAGD_CPU_LEVEL"); env != nullptr) {
    const CpuLevel want = enum_from_name<CpuLevel>(env).value_or(l);  // an unknown name caps nothing
    if (want < l) l = want;
  }
  return l;
}

}  // namespace

CpuLevel supported_cpu_level() {
  static const CpuLevel l = detect();
  return l;
}

CpuLevel cpu_level() {
  static const CpuLevel l = capped();
  return l;
}

std::string cpu_summary() {
  std::string s(cpu_level_name(cpu_level()));
  s += " (";
  const std::pair<const char*, bool> features[] = {
      {"avx2", __builtin_cpu_supports("avx2")},         {"fma", __builtin_cpu_supports("fma")},
      {"f16c", __builtin_cpu_supports("f16c")},         {"avx512f", __builtin_cpu_supports("avx512f")},
      {"avx512bw", __builtin_cpu_supports("avx512bw")}, {"avx512vl", __builtin_cpu_supports("avx512vl")},
      {"avx512vnni", __builtin_cpu_supports("avx512vnni")}, {"avx512bf16", __builtin_cpu_supports("avx512bf16")}};
  bool first = true;
  for (const auto& [name, has] : features) {
    if (!has) continue;
    s += first ? "" : " ";
    s += name;
    first = false;
  }
  return s + ")";
}

}  // namespace ragd::kernels

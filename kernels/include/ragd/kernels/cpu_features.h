// The instruction sets the CPU kernels use, detected at run time (the binary runs on any x86-64;
// nothing beyond the baseline is assumed at compile time).
//   kAvx512: AVX-512 F, BW, VL and VNNI, plus F16C (int8 dot products, 16-lane f32)
//   kAvx2:   AVX2, FMA and F16C
//   kGeneric: anything else (portable loops)
// RAGD_CPU_LEVEL=generic|avx2|avx512 in the environment caps the level (e.g. to measure or test the
// portable path on a newer machine); it can never raise it above what the CPU has.
// Thread-safety: detection runs once (function-local static); safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ragd/common/enum_names.h"

namespace ragd::kernels {

enum class CpuLevel : uint8_t { kGeneric, kAvx2, kAvx512 };
inline constexpr auto kCpuLevelNames = make_enum_names<CpuLevel>(
    "RAGD_CPU_LEVEL", {{CpuLevel::kGeneric, "generic"}, {CpuLevel::kAvx2, "avx2"}, {CpuLevel::kAvx512, "avx512"}});
constexpr const auto& ragd_enum_names(CpuLevel) { return kCpuLevelNames; }
static_assert(enum_names_valid(kCpuLevelNames));
inline std::string_view cpu_level_name(CpuLevel l) { return enum_name(l); }

CpuLevel supported_cpu_level();  // what the CPU has
CpuLevel cpu_level();            // what the kernels use (supported, capped by RAGD_CPU_LEVEL)
// One line for logs: the level in use and the features seen, e.g. "avx512 (avx2 fma f16c avx512f
// avx512bw avx512vl avx512vnni avx512bf16)".
std::string cpu_summary();

}  // namespace ragd::kernels

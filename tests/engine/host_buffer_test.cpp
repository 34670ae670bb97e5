// The engine's large host allocations (engine/src/host_buffer.h): alignment, zeroing, and that a
// buffer of whole 2 MiB pages is backed by transparent huge pages where the kernel offers them.
#include "host_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace ragd::engine {
namespace {

// The kernel's THP setting `name` (enabled, defrag): the bracketed word of its file under
// /sys/kernel/mm/transparent_hugepage; "" when the file is not there.
std::string thp_mode(const char* name = "enabled") {
  std::ifstream in(std::string("/sys/kernel/mm/transparent_hugepage/") + name);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t a = s.find('['), b = s.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : s.substr(a + 1, b - a - 1);
}

// kB of AnonHugePages in the mapping of /proc/self/smaps that holds `p`.
long anon_huge_kb(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = addr >= lo && addr < hi;
      continue;
    }
    long kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

TEST(HostBuffer, AlignedZeroedAndWritableAtOddSizes) {
  std::mt19937 rng(5);
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{4097}, size_t{(2u << 20) - 1}, size_t{(2u << 20) + 12345},
                       size_t{(6u << 20) + 7}}) {
    HostBuffer b(bytes, /*zero=*/true);
    ASSERT_FALSE(b.empty());
    EXPECT_EQ(b.size(), bytes);
    const size_t align = HostBuffer::huge_pages_for(bytes) ? HostBuffer::kHugePage : 64;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % align, 0u) << bytes;
    for (int i = 0; i < 64; ++i) ASSERT_EQ(b.data()[rng() % bytes], std::byte{0}) << bytes;
    b.data()[bytes - 1] = std::byte{7};
    EXPECT_EQ(b.data()[bytes - 1], std::byte{7});
  }
  EXPECT_FALSE(HostBuffer::huge_pages_for((2u << 20) - 1));
  EXPECT_TRUE(HostBuffer().empty());
}

TEST(HostBuffer, WholeHugePagesAreHugeWhereTheKernelOffersThem) {
  const std::string mode = thp_mode();
  if (mode != "madvise" && mode != "always") GTEST_SKIP() << "transparent huge pages are '" << mode << "' here";
  // A fault in an advised region gets a huge page at once only where it may compact memory for it
  // (defrag always, madvise or defer+madvise); otherwise khugepaged collapses the pages later.
  const std::string defrag = thp_mode("defrag");
  if (defrag != "always" && defrag != "madvise" && defrag != "defer+madvise")
    GTEST_SKIP() << "THP defrag is '" << defrag << "' here: huge pages arrive later, not at the first fault";
  if (!HostBuffer::huge_pages_for(HostBuffer::kHugePage)) GTEST_SKIP() << "RAGD_HUGEPAGES=0 in the environment";
  HostBuffer b(8 * HostBuffer::kHugePage, /*zero=*/true);  // touched: faulted in
  EXPECT_GT(anon_huge_kb(b.data()), 0) << "an 8 MiB buffer got no huge page under THP mode " << mode;
}

}  // namespace
}  // namespace ragd::engine

// The prompt both KV-blending tests build: [head 11][doc 29][doc 22][doc 21][tail 6] = 89 tokens
// (odd sizes, not multiples of the block size 8).
#pragma once

#include <vector>

namespace ragd::pipelines::testing {

struct BlendLayout {
  int head = 11;
  std::vector<int> starts = {11, 40, 62};
  std::vector<int> lens = {29, 22, 21};
  int tail = 6;
  int total() const { return starts.back() + lens.back() + tail; }
  int region_end() const { return starts.back() + lens.back(); }
};

}  // namespace ragd::pipelines::testing

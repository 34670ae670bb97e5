#include "eval_score.h"

#include <cctype>
#include <map>
#include <sstream>

namespace ragd::tools {

std::vector<std::string> answer_tokens(std::string_view s) {
  std::string cleaned;
  cleaned.reserve(s.size());
  for (unsigned char c : s) {
    if (std::ispunct(c)) cleaned += ' ';
    else cleaned += static_cast<char>(std::tolower(c));
  }
  std::vector<std::string> out;
  std::istringstream in(cleaned);
  for (std::string w; in >> w;)
    if (w != "a" && w != "an" && w != "the") out.push_back(w);
  return out;
}

std::string normalize_answer(std::string_view s) {
  std::string out;
  for (const auto& w : answer_tokens(s)) out += (out.empty() ? "" : " ") + w;
  return out;
}

bool exact_match(std::string_view prediction, std::string_view gold) {
  return normalize_answer(prediction) == normalize_answer(gold);
}

double token_f1(std::string_view prediction, std::string_view gold) {
  const auto p = answer_tokens(prediction), g = answer_tokens(gold);
  if (p.empty() || g.empty()) return p.empty() && g.empty() ? 1.0 : 0.0;
  std::map<std::string, int> count;
  for (const auto& w : g) ++count[w];
  int common = 0;
  for (const auto& w : p)
    if (auto it = count.find(w); it != count.end() && it->second > 0) {
      --it->second;
      ++common;
    }
  if (common == 0) return 0.0;
  const double precision = static_cast<double>(common) / p.size(), recall = static_cast<double>(common) / g.size();
  return 2 * precision * recall / (precision + recall);
}

}  // namespace ragd::tools

// Vocabulary of the synthetic RAG workloads (`ragctl bench --workload synthetic`, `ragctl simulate`'s
// request files, bench_e2e and bench_iterative):
// made-up topic words that occur only in their topic's documents, filler words shared by all
// documents, and question words that occur in no document, so that the retrieved set of a query
// depends on its topic word only. Thread-safety: pure functions and constants.
#pragma once

#include <cstdint>
#include <string>

namespace ragd::tools {

// A pronounceable word unique to `topic` ("to" + base-12 syllables).
inline std::string synthetic_topic_word(uint32_t topic) {
  static const char* kSyllables[] = {"ka", "lo", "mi", "ru", "te", "zo", "bi", "na", "qu", "fe", "xi", "vo"};
  std::string w = "to";
  do {
    w += kSyllables[topic % 12];
    topic /= 12;
  } while (topic);
  return w;
}

inline constexpr const char* kSyntheticAskWords[] = {"please", "explain", "summarize", "describe", "briefly",
                                                     "overview", "details", "question", "compare", "why",
                                                     "how", "list"};

inline constexpr const char* kSyntheticFillerWords[] = {
    "the",    "river",  "stone",   "light", "market", "winter", "garden",   "machine",
    "letter", "story",  "window",  "mountain", "signal", "paper", "engine", "forest",
    "music",  "harbor", "silver",  "orbit", "language", "bridge", "morning", "castle"};

}  // namespace ragd::tools

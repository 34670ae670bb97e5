// Byte-level BPE trainer with incremental pair counts (pair -> count, pair -> words containing it).
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "bpe_model.h"
#include "ragd/engine/tokenizer.h"
#include "tokenizer_regex.h"

namespace ragd::engine {

namespace {

std::string json_str(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"') o += "\\\"";
    else if (c == '\\') o += "\\\\";
    else if (c < 0x20) o += fmt::format("\\u{:04x}", c);
    else o += static_cast<char>(c);
  }
  return o + "\"";
}

std::string to_unicode(std::string_view bytes) {
  const auto& map = bpe::byte_to_unicode();
  std::string s;
  for (unsigned char c : bytes) s += map[c];
  return s;
}

bool has_digit(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

}  // namespace

Result<std::string> train_byte_level_bpe(std::string_view corpus, const BpeTrainOptions& opts) {
  const int n_special = static_cast<int>(opts.special_tokens.size());
  if (opts.vocab_size < 256 + n_special)
    return Status::InvalidArgument(fmt::format("vocab_size {} is smaller than 256 bytes + {} special tokens",
                                               opts.vocab_size, n_special));
  RAGD_ASSIGN_OR_RETURN(auto regex, bpe::Regex::compile(bpe::kLlama3Pattern));
  std::map<std::string, int64_t> counts;  // ordered: deterministic word order
  regex->split(corpus, [&](size_t b, size_t e, bool) { ++counts[std::string(corpus.substr(b, e - b))]; });

  std::vector<std::string> tok(256);
  for (int b = 0; b < 256; ++b) tok[b] = std::string(1, static_cast<char>(b));
  std::unordered_map<std::string, int32_t> tok_id;
  for (int b = 0; b < 256; ++b) tok_id[tok[b]] = b;

  struct Word {
    std::vector<int32_t> syms;
    int64_t freq;
  };
  std::vector<Word> words;
  for (auto& [w, f] : counts) {
    Word wd{{}, f};
    for (unsigned char c : w) wd.syms.push_back(c);
    words.push_back(std::move(wd));
  }
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::unordered_set<int32_t>> where;
  auto add_word = [&](int32_t wi, int sign) {
    const auto& s = words[wi].syms;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t k = pair_key(s[i], s[i + 1]);
      pair_count[k] += sign * words[wi].freq;
      if (sign > 0) where[k].insert(wi);
    }
  };
  for (int32_t wi = 0; wi < static_cast<int32_t>(words.size()); ++wi) add_word(wi, +1);

  std::vector<std::pair<int32_t, int32_t>> merges;
  const int target_merges = opts.vocab_size - 256 - n_special;
  while (static_cast<int>(merges.size()) < target_merges) {
    uint64_t best = 0;
    int64_t best_count = 1;  // a pair must occur at least twice
    std::string best_bytes;
    for (const auto& [k, c] : pair_count) {
      if (c < best_count) continue;
      if (!opts.merge_digits && (has_digit(tok[k >> 32]) || has_digit(tok[k & 0xffffffffu]))) continue;
      std::string mb = tok[k >> 32] + tok[k & 0xffffffffu];
      if (c > best_count || best_bytes.empty() || mb < best_bytes || (mb == best_bytes && k < best)) {
        best = k;
        best_count = c;
        best_bytes = std::move(mb);
      }
    }
    if (best_bytes.empty()) break;
    const auto a = static_cast<int32_t>(best >> 32), b = static_cast<int32_t>(best & 0xffffffffu);
    int32_t m;
    auto it = tok_id.find(best_bytes);
    if (it != tok_id.end()) {
      m = it->second;
    } else {
      m = static_cast<int32_t>(tok.size());
      tok.push_back(best_bytes);
      tok_id.emplace(best_bytes, m);
    }
    merges.emplace_back(a, b);
    std::vector<int32_t> affected(where[best].begin(), where[best].end());
    std::sort(affected.begin(), affected.end());
    for (int32_t wi : affected) {
      add_word(wi, -1);
      auto& s = words[wi].syms;
      std::vector<int32_t> ns;
      ns.reserve(s.size());
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          ns.push_back(m);
          ++i;
        } else {
          ns.push_back(s[i]);
        }
      }
      s.swap(ns);
      add_word(wi, +1);
    }
    pair_count.erase(best);
    where.erase(best);
    // Drop pairs whose count fell to zero so the max scan stays short.
    for (auto pit = pair_count.begin(); pit != pair_count.end();)
      pit = pit->second <= 0 ? pair_count.erase(pit) : std::next(pit);
  }

  // ---- tokenizer.json ----
  std::string vocab, merges_json, added;
  for (size_t id = 0; id < tok.size(); ++id)
    vocab += fmt::format("{}\n      {}: {}", id ? "," : "", json_str(to_unicode(tok[id])), id);
  for (size_t i = 0; i < merges.size(); ++i)
    merges_json += fmt::format("{}\n      [{}, {}]", i ? "," : "", json_str(to_unicode(tok[merges[i].first])),
                               json_str(to_unicode(tok[merges[i].second])));
  std::vector<std::string> specials = opts.special_tokens;
  int next_id = static_cast<int>(tok.size());
  for (int r = 0; next_id + static_cast<int>(specials.size()) < opts.pad_to; ++r)
    specials.push_back(fmt::format("<|reserved_special_token_{}|>", r));
  for (size_t i = 0; i < specials.size(); ++i)
    added += fmt::format(
        "{}\n    {{\"id\": {}, \"content\": {}, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
        "\"normalized\": false, \"special\": true}}",
        i ? "," : "", next_id + i, json_str(specials[i]));
  std::string bos = specials.empty() ? "" : specials[0];
  std::string post = bos.empty() ? "null"
                                 : fmt::format(
                                       "{{\"type\": \"TemplateProcessing\", \"single\": [{{\"SpecialToken\": {{\"id\": {}, "
                                       "\"type_id\": 0}}}}, {{\"Sequence\": {{\"id\": \"A\", \"type_id\": 0}}}}], "
                                       "\"pair\": [], \"special_tokens\": {{}}}}",
                                       json_str(bos));
  return fmt::format(
      "{{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [{}\n  ],\n"
      "  \"normalizer\": null,\n"
      "  \"pre_tokenizer\": {{\"type\": \"Sequence\", \"pretokenizers\": [{{\"type\": \"Split\", \"pattern\": {{\"Regex\": {}}}, "
      "\"behavior\": \"Isolated\", \"invert\": false}}, {{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
      "\"trim_offsets\": true, \"use_regex\": false}}]}},\n"
      "  \"post_processor\": {},\n"
      "  \"decoder\": {{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true}},\n"
      "  \"model\": {{\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
      "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": false,\n"
      "    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {{{}\n    }},\n    \"merges\": [{}\n    ]\n  }}\n}}\n",
      added, json_str(bpe::kLlama3Pattern), post, vocab, merges_json);
}

std::string_view builtin_training_text() {
  static const char* kText = R"(The river town woke slowly. Fishermen pulled their boats onto the gravel while the bakery on the corner opened its shutters, and the smell of fresh bread drifted down the narrow street. Children ran past the old stone bridge on their way to school, shouting to each other about a dog that had learned to open the gate by itself.
In the library, a young woman named Clara was reading about the history of the valley. The first settlers had arrived more than three hundred years ago, bringing seeds, tools and a stubborn belief that the land would feed them. They were right, mostly: the soil was rich, the summers were long, and the river gave them water, fish and a road to the sea.
What makes a good question? A good question is specific enough to answer and open enough to teach you something you did not expect. When you ask a system to find information, it first has to understand what you mean, then search through everything it knows, and finally write an answer that is both correct and useful.
Retrieval works like a patient librarian. You describe what you need; the librarian walks along the shelves, pulls out the books that seem relevant, and opens each one at the right page. The answer is written only after the evidence is on the table. If the books are already open on the desk from yesterday, the work is much faster.
Computers store numbers in memory, and memory is organized in blocks. A cache keeps recently used blocks close to the processor, because reading from a nearby cache takes a few nanoseconds while reading from a disk can take thousands of times longer. Good systems decide carefully which blocks to keep and which to evict.
On Monday the weather was cold and grey. On Tuesday it rained all day, and the streets were full of umbrellas. By Wednesday the sun had returned, and everyone seemed to be outside: walking, talking, sitting in the park, drinking coffee and reading newspapers. Thursday and Friday were warm and bright.
The recipe is simple. Take two cups of flour, one cup of water, a spoonful of salt and a little yeast. Mix everything in a large bowl, cover it with a towel, and let the dough rest for an hour. Then shape it into a round loaf and bake it at two hundred and twenty degrees for about forty minutes.
"Where are you going?" asked the old man. "To the mountains," she said. "I want to see the lake before winter comes." He nodded and handed her a map. "Follow the path along the river, then turn left at the wooden sign. It is a long walk, but the view is worth it."
Scientists measure things carefully. They repeat each experiment many times, write down every result, and compare their numbers with what theory predicts. When the numbers disagree, they look for mistakes first; only when the mistakes are ruled out do they consider that the theory itself might be wrong.
In 1969, people walked on the Moon for the first time. In 1989, a wall fell in Berlin. In 2007, a small phone with a large screen changed how millions of people used the internet. Each of these events started with an idea that many people thought was impossible.
The model reads the question, looks at the retrieved passages, and generates an answer one token at a time. Each new token depends on every token before it, so the model keeps a memory of keys and values for the whole context. Reusing that memory across requests saves a great deal of computation.
Good writing is clear writing. Use short sentences when you can, choose concrete words, and say one thing at a time. Read your text aloud: if you run out of breath, the sentence is too long. If you cannot explain an idea simply, you probably do not understand it well enough yet.
The market opened at nine o'clock. Farmers sold apples, pears, cheese, eggs, honey and flowers. A musician played the violin near the fountain, and a small crowd gathered to listen. Prices were fair, the people were friendly, and by noon most of the stalls were nearly empty.
She wrote the letter three times before she was happy with it. The first version was too formal, the second was too short, and the third said exactly what she wanted to say: thank you for your help, I will never forget it, and I hope we meet again soon.
Questions and answers: What is the capital of France? Paris. How many days are in a week? Seven. What color is the sky on a clear day? Blue. Who wrote the play about the prince of Denmark? William Shakespeare. What is two plus three? Five.
)";
  return kText;
}

}  // namespace ragd::engine

// ragctl train-tokenizer / encode-episodes: the C++ half of the QA model's training data, so that
// training sees exactly the token ids that serving produces.
//
//   ragctl train-tokenizer --text FILE [--text FILE ...] --vocab N [--pad-to M] [--no-digit-merges]
//                          --out tokenizer.json
//   ragctl encode-episodes --tokenizer tokenizer.json --in episodes.jsonl --out episodes.bin
//                          [--max-tokens N]
//
// An episode line is {"passages": ["...", ...], "question": "...", "answer": "..."}. Each passage is
// chunked by the ingestion chunker (default options) and the prompt is laid out by the default
// pipeline's PromptBuilder, byte for byte as a `default` pipeline run builds it; the answer is
// followed by the first end-of-turn id. An episode may add follow-up turns,
// "turns": [{"question", "answer"}, ...]: each is a further user turn ("Question: ...") and answer
// in the chat template, after the first answer. Output (little-endian):
//   "RAGDEPS1" | u32 count | per episode: u32 prompt_len, u32 answer_len, i32 ids[prompt_len + answer_len]
// or, when any episode has follow-up turns,
//   "RAGDEPS2" | u32 count | per episode: u32 n, u32 spans, (u32 start, u32 len)[spans], i32 ids[n]
// where the spans are the answer tokens (each answer and its end-of-turn id).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include "command.h"
#include "ragd/common/status.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/prompt_builder.h"
#include "ragd/retrieval/chunker.h"

namespace ragd::tools {
namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError(path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct TokArgs {
  std::vector<std::string> text;
  int vocab = 2048;
  int pad_to = 0;
  bool no_digit_merges = false;
  std::string out;
};

Status train_tokenizer(const TokArgs& a) {
  std::string corpus;
  for (const auto& t : a.text) {
    RAGD_ASSIGN_OR_RETURN(std::string s, read_file(t));
    corpus += s;
    corpus += '\n';
  }
  engine::BpeTrainOptions o;
  o.vocab_size = a.vocab;
  o.pad_to = a.pad_to;
  o.merge_digits = !a.no_digit_merges;
  RAGD_ASSIGN_OR_RETURN(std::string json, engine::train_byte_level_bpe(corpus, o));
  RAGD_ASSIGN_OR_RETURN(auto tok, engine::Tokenizer::from_json(json, a.out));  // round-trip check
  std::ofstream f(a.out, std::ios::binary);
  if (!f || !(f << json) || !f.flush()) return Status::IOError(a.out + ": cannot write");
  std::printf("tokenizer: %d ids from %zu bytes of text -> %s\n", tok->vocab_size(), corpus.size(), a.out.c_str());
  return Status::OK();
}

struct EncArgs {
  std::string tokenizer, in, out;
  int max_tokens = 4096;
};

void put_u32(std::string* o, uint32_t v) { o->append(reinterpret_cast<const char*>(&v), 4); }

Status encode_episodes(const EncArgs& a) {
  RAGD_ASSIGN_OR_RETURN(auto tok, engine::Tokenizer::from_file(a.tokenizer));
  engine::ModelConfig cfg;  // architecture llama: the template is chosen by the tokenizer's specials
  pipelines::PromptBuilder builder(*tok, cfg);
  const pipelines::PipelineSpec spec = pipelines::default_pipeline_spec();
  RAGD_ASSIGN_OR_RETURN(auto chunker, retrieval::Chunker::create(*tok));
  std::optional<int32_t> eot = tok->token_to_id("<|eot_id|>");
  if (!eot) eot = tok->token_to_id("<|im_end|>");
  if (!eot) eot = tok->token_to_id("<|end_of_text|>");
  if (!eot) return Status::InvalidArgument(a.tokenizer + ": no end-of-turn token (<|eot_id|>, <|im_end|> or <|end_of_text|>)");

  // A follow-up turn: the chat template's text between one assistant answer's end of turn and the
  // next assistant answer, around "Question: <q>" (taken from a rendered three-message chat).
  const engine::ChatTemplate tmpl = builder.resolve(spec.chat_template);
  const std::string rendered =
      engine::apply_chat_template(tmpl, std::vector<engine::ChatMessage>{{"user", "\x01"}, {"assistant", "\x02"}, {"user", "\x03"}}, true);
  const size_t p2 = rendered.find('\x02'), p3 = rendered.find('\x03');
  if (p2 == std::string::npos || p3 == std::string::npos) return Status::Internal("encode-episodes: cannot render a follow-up turn");
  std::string follow_up_head = rendered.substr(p2 + 1, p3 - p2 - 1);
  const std::string eot_text = tok->decode(std::vector<int32_t>{*eot});
  if (follow_up_head.rfind(eot_text, 0) == 0) follow_up_head = follow_up_head.substr(eot_text.size());  // the answer's own eot
  std::string prefix = spec.question_prefix;
  prefix.erase(0, prefix.find_first_not_of(" \n"));
  follow_up_head += prefix;
  const std::string follow_up_tail = rendered.substr(p3 + 1);
  std::vector<std::pair<std::vector<int32_t>, std::vector<std::pair<uint32_t, uint32_t>>>> episodes;
  bool multi_turn = false;

  std::ifstream in(a.in);
  if (!in) return Status::IOError(a.in + ": cannot open");
  std::string body;
  uint32_t count = 0;
  size_t total_tokens = 0;
  int longest = 0;
  simdjson::dom::parser parser;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto where = [&](const std::string& what) { return Status::InvalidArgument(fmt::format("{}:{}: {}", a.in, lineno, what)); };
    simdjson::dom::element e;
    if (parser.parse(line).get(e)) return where("not a JSON object");
    simdjson::dom::array passages;
    std::string_view question, answer;
    if (e["passages"].get_array().get(passages)) return where("'passages' must be an array of strings");
    if (e["question"].get_string().get(question)) return where("'question' must be a string");
    if (e["answer"].get_string().get(answer)) return where("'answer' must be a string");
    std::vector<std::vector<int32_t>> docs;
    for (auto p : passages) {
      std::string_view text;
      if (p.get_string().get(text)) return where("'passages' must be an array of strings");
      for (auto& c : chunker.chunk("p", text)) docs.push_back(std::move(c.token_ids));
    }
    std::vector<int32_t> ids = builder.build_rag(spec, docs, std::string(question)).flat();
    std::vector<std::pair<uint32_t, uint32_t>> spans;  // answer tokens (targets): [start, start + len)
    auto add_answer = [&](std::string_view text) {
      std::vector<int32_t> ans = tok->encode(text, /*add_bos=*/false, /*parse_special=*/false);
      ans.push_back(*eot);
      spans.emplace_back(static_cast<uint32_t>(ids.size()), static_cast<uint32_t>(ans.size()));
      ids.insert(ids.end(), ans.begin(), ans.end());
    };
    add_answer(answer);
    simdjson::dom::array turns;
    if (e["turns"].get_array().get(turns) == simdjson::SUCCESS) {
      for (auto t : turns) {
        std::string_view tq, ta;
        if (t["question"].get_string().get(tq) || t["answer"].get_string().get(ta))
          return where("'turns' must be an array of {\"question\", \"answer\"} objects");
        const std::vector<int32_t> cont = tok->encode(follow_up_head + std::string(tq) + follow_up_tail, false, true);
        ids.insert(ids.end(), cont.begin(), cont.end());
        add_answer(ta);
      }
      multi_turn = true;
    }
    const int n = static_cast<int>(ids.size());
    if (n > a.max_tokens) return where(fmt::format("episode has {} tokens, more than --max-tokens {}", n, a.max_tokens));
    episodes.push_back({std::move(ids), std::move(spans)});
    ++count;
    total_tokens += n;
    longest = std::max(longest, n);
  }
  // Version 1 (one answer after the prompt) unless an episode has follow-up turns.
  for (const auto& [ids, spans] : episodes) {
    if (multi_turn) {
      put_u32(&body, static_cast<uint32_t>(ids.size()));
      put_u32(&body, static_cast<uint32_t>(spans.size()));
      for (const auto& [b, l] : spans) {
        put_u32(&body, b);
        put_u32(&body, l);
      }
    } else {
      put_u32(&body, spans[0].first);
      put_u32(&body, spans[0].second);
    }
    body.append(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);
  }
  std::string head = multi_turn ? "RAGDEPS2" : "RAGDEPS1";
  put_u32(&head, count);
  std::ofstream f(a.out, std::ios::binary);
  if (!f || !(f << head << body) || !f.flush()) return Status::IOError(a.out + ": cannot write");
  std::printf("encoded %u episodes, %zu tokens (mean %.1f, max %d) -> %s\n", count, total_tokens,
              count ? static_cast<double>(total_tokens) / count : 0.0, longest, a.out.c_str());
  return Status::OK();
}

int report(const Status& s) {
  if (s.ok()) return 0;
  std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
  return 1;
}

Registration reg_tok("train-tokenizer", "train a byte-level BPE tokenizer.json on text files", [](CLI::App& sub) {
  auto a = std::make_shared<TokArgs>();
  sub.add_option("--text", a->text, "training text file (repeatable)")->required()->check(CLI::ExistingFile);
  sub.add_option("--vocab", a->vocab, "bytes + merges + special tokens (default 2048)");
  sub.add_option("--pad-to", a->pad_to, "pad with reserved special tokens to this many ids (default off)");
  sub.add_flag("--no-digit-merges", a->no_digit_merges, "never merge digits: numbers are spelled digit by digit");
  sub.add_option("--out", a->out, "output tokenizer.json")->required();
  return [a]() { return report(train_tokenizer(*a)); };
});

Registration reg_enc("encode-episodes", "tokenize RAG QA episodes (JSONL) exactly as the default pipeline prompts",
                     [](CLI::App& sub) {
                       auto a = std::make_shared<EncArgs>();
                       sub.add_option("--tokenizer", a->tokenizer, "tokenizer.json")->required()->check(CLI::ExistingFile);
                       sub.add_option("--in", a->in, "episodes JSONL")->required();
                       sub.add_option("--out", a->out, "output .bin")->required();
                       sub.add_option("--max-tokens", a->max_tokens, "reject longer episodes (default 4096)");
                       return [a]() { return report(encode_episodes(*a)); };
                     });

}  // namespace
}  // namespace ragd::tools

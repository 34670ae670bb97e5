// Tokenizer loaded from a Hugging Face tokenizer.json: byte-level BPE (GPT-2 / Llama-3 / Qwen2,
// pre-tokenizer regex through PCRE2 with Unicode properties) or SentencePiece-style BPE ("▁",
// byte fallback; Llama-2 / Mistral); added and special tokens.
// Thread-safety: a loaded Tokenizer is immutable; encode/decode are safe from any thread.
// StreamDecoder is per sequence and not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"
#include "ragd/engine/tool_calls.h"

namespace ragd::engine {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Errors name the file and the problem ("tokenizer.json: model.merges[12]: ...").
  static Result<std::unique_ptr<Tokenizer>> from_file(const std::string& path);
  static Result<std::unique_ptr<Tokenizer>> from_json(std::string_view json, std::string_view source_name);

  // Special/added tokens in `text` are matched as whole tokens when parse_special is true.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos = false,
                                      bool parse_special = true) const = 0;
  // Decodes to UTF-8; special tokens are rendered unless skip_special.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = false) const = 0;
  // Raw bytes a single token stands for (may be part of a UTF-8 character).
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::vector<int32_t> eos_ids() const = 0;
  // Spaces the decoder strips from the start of the decoded text (SentencePiece-style "▁Hello"
  // decodes to "Hello"); 0 for byte-level. StreamDecoder applies it to the first token.
  virtual int leading_strip() const { return 0; }
};

// Incremental detokenization that never emits half a UTF-8 character.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = true) : tok_(tok), skip_special_(skip_special) {}
  // Returns the text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is left (invalid trailing bytes become U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
  bool started_ = false;  // a non-skipped token has been pushed (leading strip applied)
};

// Deterministic byte-level BPE training (used by `ragctl make-model` to ship a real tokenizer with
// random-weight models): the corpus is split with the Llama-3 pre-tokenizer regex, symbols start
// as the 256 bytes, and the most frequent adjacent pair is merged until `vocab_size` is reached or
// no pair occurs twice (ties: the pair whose merged bytes sort first). Token ids: 0..255 bytes,
// then merges in order, then special tokens, then reserved special tokens up to pad_to.
struct BpeTrainOptions {
  int vocab_size = 512;  // target size of bytes + merges + special tokens (before padding)
  std::vector<std::string> special_tokens = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
                                             "<|start_header_id|>", "<|end_header_id|>", "<|im_start|>",
                                             "<|im_end|>"};
  int pad_to = 0;  // adds <|reserved_special_token_N|> until the vocabulary has this many ids (0 = off)
  // false: no merge contains a digit, so every number is spelled digit by digit (a model can copy
  // numbers it never saw as a whole); default true (digits merge like any other bytes).
  bool merge_digits = true;
};
// Returns the tokenizer.json text (HF format: Split + ByteLevel pre-tokenizer, ByteLevel decoder,
// TemplateProcessing that adds the first special token as BOS).
Result<std::string> train_byte_level_bpe(std::string_view corpus, const BpeTrainOptions& opts);
// A built-in English text sample (~6 KB) for train_byte_level_bpe.
std::string_view builtin_training_text();

// Chat templates built in (no Jinja): llama3, chatml (Qwen2), mistral.
// Aliases: llama-3, qwen2 (chatml), llama2 (mistral), raw (none).
enum class ChatTemplate : uint8_t { kLlama3, kChatML, kMistral, kNone };
inline constexpr auto kChatTemplateNames = make_enum_names<ChatTemplate>(
    "chat_template", {{ChatTemplate::kLlama3, "llama3"},
                      {ChatTemplate::kChatML, "chatml"},
                      {ChatTemplate::kMistral, "mistral"},
                      {ChatTemplate::kNone, "none"},
                      {ChatTemplate::kLlama3, "llama-3"},
                      {ChatTemplate::kChatML, "qwen2"},
                      {ChatTemplate::kMistral, "llama2"},
                      {ChatTemplate::kNone, "raw"}});
constexpr const auto& ragd_enum_names(ChatTemplate) { return kChatTemplateNames; }
static_assert(enum_names_valid(kChatTemplateNames));
struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant" | "tool"
  std::string content;
  std::vector<ToolCall> tool_calls = {};  // assistant turns that called functions (tool_calls.h)
  std::string tool_call_id = {};          // tool turns: the call this result answers
  std::string name = {};                  // tool turns: the function's name, when known
};
inline Result<ChatTemplate> parse_chat_template(std::string_view name) { return parse_enum<ChatTemplate>(name); }
std::string apply_chat_template(ChatTemplate t, std::span<const ChatMessage> messages,
                                bool add_generation_prompt = true);
// The tool calls a built-in template's model is taught: hermes, except llama3 (llama3_json) and
// mistral (mistral).
std::string_view builtin_tool_call_format(ChatTemplate t);
// A conversation with tools, for templates that know no tools (the built-ins): the tools and the
// way to call them (`f`) join the system message (one is added first when there is none),
// assistant calls become their text in `f`, tool results become user turns
// "<tool_response>\n...\n</tool_response>".
std::vector<ChatMessage> fold_tools_into_messages(const ToolCallFormat& f, std::span<const ChatMessage> messages,
                                                  std::span<const ToolDef> tools);

}  // namespace ragd::engine

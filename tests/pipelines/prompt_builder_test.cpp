// PromptBuilder with a model's own chat template ([prompt] chat_template = "model"): RAG prompts
// and chats render through it, segment boundaries still fall where the built-in templates put
// them, templates that refuse a system turn get it inside the user turn, and "auto" / built-in
// names keep the built-in templates.
#include <algorithm>

#include <gtest/gtest.h>

#include "ragd/engine/model_chat_template.h"
#include "ragd/engine/tokenizer.h"
#include "tiny_bpe.h"
#include "ragd/pipelines/prompt_builder.h"

namespace ragd::pipelines {
namespace {

std::unique_ptr<engine::Tokenizer> tokenizer() { return testing::tiny_bpe_tokenizer(); }

std::shared_ptr<const engine::ModelChatTemplate> model_template(std::string_view src) {
  auto t = engine::ModelChatTemplate::from_source(
      src, engine::jinja::Value::dict({{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}), "test template");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::shared_ptr<const engine::ModelChatTemplate>(std::move(t).value());
}

// A Llama-3-like template with its own wording, so its output differs from the built-in.
constexpr std::string_view kOwn =
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant"
    "<|end_header_id|>\n\nOwn:{% endif %}";

std::vector<std::vector<int32_t>> docs(const engine::Tokenizer& tok) {
  return {tok.encode("First passage.", false, false), tok.encode("Second passage.", false, false)};
}

TEST(PromptBuilderModelTemplate, RagPromptRendersThroughTheModelTemplate) {
  auto tok = tokenizer();
  engine::ModelConfig cfg;
  auto own = model_template(kOwn);
  PromptBuilder pb(*tok, cfg, own);
  PipelineSpec spec;  // chat_template = "model" by default
  ASSERT_EQ(spec.chat_template, "model");
  const auto d = docs(*tok);
  const PromptSegments p = pb.build_rag(spec, d, "What?");
  ASSERT_EQ(p.segs.size(), 4u);
  const std::string user = spec.context_header + "First passage." + spec.separator + "Second passage." + spec.separator +
                           spec.question_prefix + "What?";
  const std::vector<engine::ChatMessage> msgs = {{"system", spec.system_prompt}, {"user", user}};
  EXPECT_EQ(tok->decode(p.flat()), *own->render(msgs, true));
  // The head ends with the context header, the tail starts with the question: documents keep
  // their own segments (and so their knowledge-tree keys).
  EXPECT_TRUE(tok->decode(p.segs[0]).ends_with(spec.context_header));
  EXPECT_TRUE(tok->decode(p.segs.back()).starts_with(spec.question_prefix + "What?<|eot_id|>"));
  EXPECT_EQ(tok->decode(p.segs[1]), "First passage." + spec.separator);
}

TEST(PromptBuilderModelTemplate, AutoAndBuiltinNamesKeepTheBuiltinTemplates) {
  auto tok = tokenizer();
  engine::ModelConfig cfg;
  PromptBuilder with_own(*tok, cfg, model_template(kOwn));
  PromptBuilder without(*tok, cfg);
  PipelineSpec spec;
  const auto d = docs(*tok);
  for (const char* name : {"auto", "llama3", "chatml", "none"}) {
    spec.chat_template = name;
    EXPECT_EQ(with_own.build_rag(spec, d, "Q").flat(), without.build_rag(spec, d, "Q").flat()) << name;
  }
  // "model" without a model template is "auto".
  spec.chat_template = "model";
  const auto as_model = without.build_rag(spec, d, "Q").flat();
  spec.chat_template = "auto";
  EXPECT_EQ(as_model, without.build_rag(spec, d, "Q").flat());
  EXPECT_EQ(without.resolve("model"), without.resolve("auto"));
  EXPECT_FALSE(without.uses_model_template("model"));
}

TEST(PromptBuilderModelTemplate, SystemTurnGoesIntoTheUserTurnWhenTheTemplateRefusesIt) {
  auto tok = tokenizer();
  engine::ModelConfig cfg;
  auto own = model_template(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
      "<turn>{{ m.role }}\n{{ m.content }}</turn>{% endfor %}<turn>model\n");
  PromptBuilder pb(*tok, cfg, own);
  PipelineSpec spec;
  spec.system_prompt = "Be brief.";
  const PromptSegments p = pb.build_rag(spec, docs(*tok), "Q");
  EXPECT_TRUE(tok->decode(p.segs[0]).ends_with("<turn>user\nBe brief.\n\n" + spec.context_header)) << tok->decode(p.segs[0]);
}

TEST(PromptBuilderModelTemplate, TemplateThatAlwaysFailsFallsBackToAuto) {
  auto tok = tokenizer();
  engine::ModelConfig cfg;
  PromptBuilder broken(*tok, cfg, model_template("{{ raise_exception('no') }}"));
  PromptBuilder without(*tok, cfg);
  PipelineSpec spec;
  const auto d = docs(*tok);
  const auto got = broken.build_rag(spec, d, "Q").flat();
  spec.chat_template = "auto";
  EXPECT_EQ(got, without.build_rag(spec, d, "Q").flat());
}

TEST(PromptBuilderModelTemplate, ChatsRenderThroughTheModelTemplateAndItsErrorsReachTheCaller) {
  auto tok = tokenizer();
  engine::ModelConfig cfg;
  auto own = model_template(
      "{% if messages[-1].role != 'user' %}{{ raise_exception('the last message must be the user\\'s') }}{% endif %}"
      + std::string(kOwn));
  PromptBuilder pb(*tok, cfg, own);
  const std::vector<engine::ChatMessage> chat = {{"user", "Hi"}};
  auto ids = pb.build_chat(chat);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(tok->decode(*ids), *own->render(chat, true));
  const std::vector<engine::ChatMessage> bad = {{"user", "Hi"}, {"assistant", "Hello"}};
  auto err = pb.build_chat(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(err.status().message(), "test template: line 1: the last message must be the user's");
}

// [prompt] number_passages: each passage's segment starts "[n] " (n = its rank, from 1), the
// passage's own tokens follow unchanged, and without the option the segments are the passages.
TEST(PromptBuilderNumbering, PassagesStartWithTheirNumber) {
  auto tok = tokenizer();
  engine::ModelConfig cfg;
  PromptBuilder pb(*tok, cfg);
  PipelineSpec spec;
  spec.chat_template = "none";
  const auto d = docs(*tok);
  const PromptSegments plain = pb.build_rag(spec, d, "Q");
  spec.number_passages = true;
  const PromptSegments numbered = pb.build_rag(spec, d, "Q");
  ASSERT_EQ(numbered.segs.size(), plain.segs.size());
  EXPECT_EQ(numbered.segs.front(), plain.segs.front());
  EXPECT_EQ(numbered.segs.back(), plain.segs.back());
  for (size_t i = 0; i < d.size(); ++i) {
    const std::string label = "[" + std::to_string(i + 1) + "] ";
    EXPECT_EQ(tok->decode(numbered.segs[i + 1]), label + tok->decode(plain.segs[i + 1]));
    // the passage's tokens are the chunk's own, after the label's
    const auto& seg = numbered.segs[i + 1];
    const auto lab = tok->encode(label, false, false);
    ASSERT_GE(seg.size(), lab.size() + d[i].size());
    EXPECT_TRUE(std::equal(d[i].begin(), d[i].end(), seg.begin() + static_cast<std::ptrdiff_t>(lab.size())));
  }
}

}  // namespace
}  // namespace ragd::pipelines

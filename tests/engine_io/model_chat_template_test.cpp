// A model directory's own chat template: where it is read from (chat_template.jinja first, then
// tokenizer_config.json's string or named list), the special tokens passed to it, the tool_use
// choice, and the errors that name the file, line and construct.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ragd/engine/model_chat_template.h"

namespace ragd::engine {
namespace {

namespace fs = std::filesystem;

class ModelChatTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ragd_mct_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
  Result<std::unique_ptr<ModelChatTemplate>> load() { return ModelChatTemplate::load(dir_.string()); }

  fs::path dir_;
};

const std::vector<ChatMessage> kChat = {{"system", "Be brief."}, {"user", "Hi"}};

TEST_F(ModelChatTemplateTest, NoTemplateIsNotAnError) {
  auto none = load();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  write("tokenizer_config.json", R"({"bos_token": "<s>", "model_max_length": 4096})");
  none = load();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

TEST_F(ModelChatTemplateTest, StringTemplateWithSpecialTokens) {
  write("tokenizer_config.json", R"({
    "bos_token": {"content": "<s>", "lstrip": false, "special": true},
    "eos_token": "</s>", "pad_token": null,
    "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}{{ pad_token is defined }}{{ tools is none }}"})");
  auto t = load();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_NE(*t, nullptr);
  EXPECT_EQ((*t)->origin(), "tokenizer_config.json chat_template");
  EXPECT_EQ(*(*t)->render(kChat), "<s>[system] Be brief.</s>\n[user] Hi</s>\n[assistant]FalseTrue");
  EXPECT_EQ(*(*t)->render(kChat, false), "<s>[system] Be brief.</s>\n[user] Hi</s>\nFalseTrue");
}

TEST_F(ModelChatTemplateTest, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  write("tokenizer_config.json", R"({"chat_template": [
    {"name": "default", "template": "plain:{{ messages|length }}"},
    {"name": "tool_use", "template": "tools:{{ tools|map(attribute='name')|join(',') }}"}]})");
  auto t = load();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_TRUE((*t)->has_tool_use_template());
  ModelChatTemplate::Request r;
  r.messages = jinja::Value::list({jinja::Value::dict({{"role", "user"}, {"content", "x"}})});
  EXPECT_EQ(*(*t)->render(r), "plain:1");
  r.tools = jinja::Value::list({jinja::Value::dict({{"name", "search"}}), jinja::Value::dict({{"name", "calc"}})});
  EXPECT_EQ(*(*t)->render(r), "tools:search,calc");
}

TEST_F(ModelChatTemplateTest, MessagesCarryExtraFields) {
  write("tokenizer_config.json",
        R"({"chat_template": "{% for m in messages %}{{ m.role }}{% if m.tool_calls %}:{{ m.tool_calls[0].function.name }}{% endif %}{% if m.tool_call_id is defined %}#{{ m.tool_call_id }}{% endif %};{% endfor %}"})");
  auto t = load();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ModelChatTemplate::Request r;
  auto msgs = jinja::Value::from_json(R"([{"role": "user", "content": "w?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "weather", "arguments": {}}}]},
    {"role": "tool", "content": "21", "tool_call_id": "abc"}])");
  ASSERT_TRUE(msgs.ok());
  r.messages = *msgs;
  EXPECT_EQ(*(*t)->render(r), "user;assistant:weather;tool#abc;");
}

TEST_F(ModelChatTemplateTest, ChatTemplateJinjaFileWins) {
  write("tokenizer_config.json", R"({"eos_token": "<e>", "chat_template": "from config"})");
  write("chat_template.jinja", "from file{{ eos_token }}\n");
  auto t = load();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)->origin(), "chat_template.jinja");
  EXPECT_EQ(*(*t)->render(kChat), "from file<e>");
}

TEST_F(ModelChatTemplateTest, ErrorsNameTheFileLineAndConstruct) {
  write("tokenizer_config.json", R"({"chat_template": "ok\n{% include 'x' %}"})");
  EXPECT_EQ(load().status().message(),
            "tokenizer_config.json chat_template: line 2: unsupported construct '{% include %}'");
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"}]})");
  EXPECT_EQ(load().status().message(),
            "tokenizer_config.json: chat_template lists named templates but none is named 'default'");
  write("tokenizer_config.json", R"({"chat_template": 5})");
  EXPECT_EQ(load().status().message(), "tokenizer_config.json: chat_template must be a string or a list of {name, template}");
  write("tokenizer_config.json", R"({"chat_template": )");
  EXPECT_EQ(load().status().code(), StatusCode::kInvalidArgument);
  write("tokenizer_config.json", R"({"chat_template": "{% if messages|length > 1 %}{{ raise_exception('one message only') }}{% endif %}"})");
  auto t = load();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->render(kChat).status().message(), "tokenizer_config.json chat_template: line 1: one message only");
}

}  // namespace
}  // namespace ragd::engine

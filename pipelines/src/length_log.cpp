#include "ragd/pipelines/length_log.h"

#include <simdjson.h>

#include "ragd/common/json_writer.h"

namespace ragd::pipelines {

std::string length_log_line(const LengthSample& s) {
  JsonWriter w;
  w.begin_object();
  w.key("pipeline").value(s.features.pipeline);
  w.key("prompt_tokens").value(s.features.prompt_tokens);
  w.key("max_tokens").value(s.features.max_tokens);
  w.key("output_tokens").value(s.output_tokens);
  w.key("finish_reason").value(s.finish_reason);
  w.key("text").value(s.features.text);
  w.end_object();
  return w.take();
}

Result<std::vector<LengthSample>> parse_length_log(std::string_view jsonl, const std::string& source) {
  std::vector<LengthSample> out;
  simdjson::dom::parser parser;
  size_t pos = 0;
  int lineno = 0;
  while (pos < jsonl.size()) {
    size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string line(jsonl.substr(pos, end - pos));
    pos = end + 1;
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](const std::string& what) {
      return Status::InvalidArgument(source + ":" + std::to_string(lineno) + ": " + what);
    };
    simdjson::dom::element doc;
    if (parser.parse(line).get(doc)) return bad("not JSON");
    simdjson::dom::object obj;
    if (doc.get_object().get(obj)) return bad("not a JSON object");
    LengthSample s;
    auto get_int = [&](const char* key, int* dst, bool required) -> Status {
      simdjson::dom::element e;
      if (obj[key].get(e)) return required ? bad(std::string("missing ") + key) : Status::OK();
      int64_t v = 0;
      if (e.get_int64().get(v) || v < 0 || v > (1 << 30)) return bad(std::string(key) + " must be a non-negative integer");
      *dst = static_cast<int>(v);
      return Status::OK();
    };
    auto get_str = [&](const char* key, std::string* dst) -> Status {
      simdjson::dom::element e;
      if (obj[key].get(e)) return Status::OK();
      std::string_view v;
      if (e.get_string().get(v)) return bad(std::string(key) + " must be a string");
      *dst = std::string(v);
      return Status::OK();
    };
    RAGD_RETURN_IF_ERROR(get_int("prompt_tokens", &s.features.prompt_tokens, true));
    RAGD_RETURN_IF_ERROR(get_int("max_tokens", &s.features.max_tokens, true));
    RAGD_RETURN_IF_ERROR(get_int("output_tokens", &s.output_tokens, true));
    RAGD_RETURN_IF_ERROR(get_str("pipeline", &s.features.pipeline));
    RAGD_RETURN_IF_ERROR(get_str("text", &s.features.text));
    RAGD_RETURN_IF_ERROR(get_str("finish_reason", &s.finish_reason));
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::unique_ptr<LengthLogWriter>> LengthLogWriter::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return Status::IOError(path + ": cannot open the length log for appending");
  return std::unique_ptr<LengthLogWriter>(new LengthLogWriter(f));
}

LengthLogWriter::~LengthLogWriter() {
  if (f_) std::fclose(f_);
}

void LengthLogWriter::append(const LengthSample& s) {
  const std::string line = length_log_line(s) + "\n";
  std::lock_guard<std::mutex> lk(mu_);
  std::fwrite(line.data(), 1, line.size(), f_);
  std::fflush(f_);
  ++lines_;
}

long LengthLogWriter::lines() const {
  std::lock_guard<std::mutex> lk(mu_);
  return lines_;
}

}  // namespace ragd::pipelines

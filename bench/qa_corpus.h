// Shared by the benchmarks that serve the QA set: examples/qa_eval/corpus.jsonl as documents
// ({"id", "title", "text"} per line; lines without them are skipped).
// Thread-safety: a pure function.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <simdjson.h>

#include "ragd/pipelines/runtime.h"

namespace ragd::bench {

inline std::vector<pipelines::DocumentInput> read_qa_corpus(const std::string& source_dir) {
  std::vector<pipelines::DocumentInput> docs;
  std::ifstream in(source_dir + "/examples/qa_eval/corpus.jsonl");
  simdjson::dom::parser p;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element e;
    std::string_view id, title, text;
    if (p.parse(line).get(e) || e["id"].get_string().get(id) || e["title"].get_string().get(title) ||
        e["text"].get_string().get(text))
      continue;
    pipelines::DocumentInput d;
    d.id = std::string(id), d.title = std::string(title), d.text = std::string(text);
    docs.push_back(std::move(d));
  }
  return docs;
}

}  // namespace ragd::bench

// ragctl convert-gguf --model DIR --out FILE.gguf [--type f32|f16|bf16|q8_0]
// Writes a ragd / Hugging Face model directory as one GGUF v3 file that llama.cpp loads (see
// gguf_writer.h for what it holds). Used by `make bench-peers` to run the same weights in both
// engines. Exits 1 with a message naming the problem on any error; nothing is left at --out then.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "command.h"
#include "gguf_writer.h"

namespace ragd::tools {
namespace {

struct Args {
  std::string model;
  std::string out;
  std::string type = "f32";
};

Status run(const Args& a) {
  RAGD_ASSIGN_OR_RETURN(GgufType type, parse_gguf_type(a.type));
  const auto t0 = std::chrono::steady_clock::now();
  GgufStats st;
  RAGD_RETURN_IF_ERROR(convert_to_gguf(a.model, a.out, type, &st));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s: %s, %s, %lld tensors, %lld keys, %.1f MB (%.1f s)\n", a.out.c_str(),
               st.architecture.c_str(), a.type.c_str(), static_cast<long long>(st.tensors),
               static_cast<long long>(st.kv_pairs), static_cast<double>(st.bytes) / 1e6, s);
  return Status::OK();
}

Registration reg("convert-gguf", "write a model directory as a GGUF file for llama.cpp (f32, f16, bf16, q8_0)",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<Args>();
                   sub.add_option("--model", a->model, "model directory (config.json, safetensors, tokenizer.json)")
                       ->required();
                   sub.add_option("--out", a->out, "output .gguf file")->required();
                   sub.add_option("--type", a->type, "f32 | f16 | bf16 | q8_0 (default f32)")
                       ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
                   return [a]() -> int {
                     if (Status st = run(*a); !st.ok()) {
                       std::fprintf(stderr, "convert-gguf: %s\n", st.to_string().c_str());
                       return 1;
                     }
                     return 0;
                   };
                 });

}  // namespace
}  // namespace ragd::tools

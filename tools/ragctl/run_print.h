// Shared by `ragctl query` and `ragctl stream`: daemon URL defaults and pretty-printing of the
// run fields (sources, usage, timings) of the daemon's JSON.
// Thread-safety: functions only; print to stdout.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include <simdjson.h>

namespace ragd::tools {

// $RAGD_URL, else http://127.0.0.1:8080.
inline std::string default_daemon_url() {
  const char* u = std::getenv("RAGD_URL");
  return u && *u ? u : "http://127.0.0.1:8080";
}
inline std::string default_api_key() {
  const char* k = std::getenv("RAGD_API_KEY");
  return k ? k : "";
}

inline double jnum(simdjson::dom::element e, const char* ptr) {
  double v = 0;
  if (e.at_pointer(ptr).get_double().get(v)) return 0;
  return v;
}
inline std::string jstr(simdjson::dom::element e, const char* ptr) {
  std::string_view v;
  if (e.at_pointer(ptr).get_string().get(v)) return "";
  return std::string(v);
}

inline void print_sources(simdjson::dom::element sources) {
  simdjson::dom::array arr;
  if (sources.get_array().get(arr) || arr.size() == 0) return;
  std::printf("Sources:\n");
  int i = 0;
  for (auto s : arr) {
    std::string snippet = jstr(s, "/snippet");
    for (auto& c : snippet)
      if (c == '\n') c = ' ';
    if (snippet.size() > 100) snippet = snippet.substr(0, 97) + "...";
    std::printf("  [%d] %s#%.0f  score %.3f  %s\n", ++i, jstr(s, "/doc_id").c_str(), jnum(s, "/chunk_id"),
                jnum(s, "/score"), snippet.c_str());
    // The citation line: title, section path, page, url.
    std::string cite = jstr(s, "/title");
    simdjson::dom::array sec;
    if (!s["section"].get_array().get(sec)) {
      std::string path;
      for (auto h : sec) {
        std::string_view v;
        if (h.get_string().get(v)) continue;
        if (!path.empty()) path += " > ";
        path += v;
      }
      if (!path.empty()) cite += (cite.empty() ? "" : " \u2014 ") + path;
    }
    if (double page = jnum(s, "/page"); page > 0) cite += ", page " + std::to_string(static_cast<long>(page));
    if (std::string url = jstr(s, "/url"); !url.empty()) cite += "  <" + url + ">";
    if (!cite.empty()) std::printf("      %s\n", cite.c_str());
  }
}

inline void print_usage_timings(simdjson::dom::element usage, simdjson::dom::element timings) {
  std::printf("Usage:   prompt %.0f, completion %.0f, reused hbm/dram/ssd/remote %.0f/%.0f/%.0f/%.0f, recomputed %.0f\n",
              jnum(usage, "/prompt_tokens"), jnum(usage, "/completion_tokens"), jnum(usage, "/reused_tokens/hbm"),
              jnum(usage, "/reused_tokens/dram"), jnum(usage, "/reused_tokens/ssd"), jnum(usage, "/reused_tokens/remote"),
              jnum(usage, "/recomputed_tokens"));
  std::printf("Timings: queue %.1f ms, retrieval %.1f ms, kv load %.1f ms, prefill %.1f ms, TTFT %.1f ms, "
              "TPOT %.2f ms, total %.1f ms\n",
              jnum(timings, "/queue_ms"), jnum(timings, "/retrieval_ms"), jnum(timings, "/kv_load_ms"),
              jnum(timings, "/prefill_ms"), jnum(timings, "/ttft_ms"), jnum(timings, "/tpot_ms"),
              jnum(timings, "/total_ms"));
  simdjson::dom::element it;
  if (!usage["iterative"].get(it))
    std::printf("Retrieval during generation (%s): %.0f searches, %.0f context changes, speculation %.0f right / "
                "%.0f wrong, %.0f tokens rolled back, %.1f ms waiting for searches\n",
                jstr(it, "/overlap").c_str(), jnum(it, "/searches"), jnum(it, "/context_changes"),
                jnum(it, "/speculative_hits"), jnum(it, "/speculative_misses"), jnum(it, "/rolled_back_tokens"),
                jnum(timings, "/search_wait_ms"));
}

}  // namespace ragd::tools

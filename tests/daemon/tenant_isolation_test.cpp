// Tenant isolation, enumerated. Tenant B must never see tenant A's documents (id, chunk, snippet,
// secret) nor reuse KV that A computed, on every pipeline kind (one-shot "default", a rerank
// pipeline, an iterative one) x request flag (speculative_prefill, reuse mode, overlap,
// context_must_include, top_k) x route (REST JSON, REST SSE, WebSocket /v1/stream, chat
// completions with "pipeline") x retrieval mode (dense, lexical, hybrid: runtime.retrieval_mode).
// The shared corpus is generated sentences behind a trained IVF index (`ragctl ingest --index
// IVF8,Flat`) and its lexical index; the daemon is the real one with the tiny random model.
//
// Controls, so that every check can fail: A retrieves its own documents on the same path; A reuses
// its own KV; tenant D ("delta") owns copies of B's documents and sends every request B sends, in
// the same order but before A's run, so B's answers (sources, prompt length, reused tokens) must
// equal D's: any difference is A's run showing through.
//
// The tenant filter is inside each search, not applied to its result: A's four documents are the
// best matches of the question in every mode (A's top 4 is A's own, checked), so B's top 4 would
// come back empty if the filter came after the match; B sees at least four matching chunks of its
// own and shared ones, and must get four.
//
// RAGD_E2E_BIN_DIR=DIR runs these tests against the ragd and ragctl of another build.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "real_daemon.h"

namespace ragd::testing {
namespace {

const std::string kSecret = "swordfish";
const std::string kQuery = "what is the vault password?";
// Every one of A's documents names the secret and matches kQuery far better than any shared
// sentence, so A's top 4 (and whatever the reranker keeps of them) are A's own.
const std::vector<std::pair<std::string, std::string>> kDocsA = {
    {"vault", "The vault password is swordfish seventy seven. Keep the vault password secret."},
    {"vault-annex", "What is the vault password of the annex? It is swordfish too, said the keeper of the vault."},
    {"vault-rotation", "The vault password rotates: swordfish this month. The vault password log is private."},
    {"vault-backup", "Backup vault password: swordfish. The vault password opens the backup vault."},
};
// B's (and D's) own documents; two share a word with kQuery, as do kSharedVault's three shared
// ones: B sees five chunks that match the question lexically (any k up to 4 fills), all of them
// weaker matches than every one of A's.
const std::vector<std::pair<std::string, std::string>> kDocsB = {
    {"b1", "Bananas are yellow fruit rich in potassium. The fruit stall has no password."},
    {"b2", "The garden has roses and tulips in spring."},
    {"b3", "Trains run on rails between the cities; the station keeps tickets in a vault."},
};
const std::vector<std::pair<std::string, std::string>> kSharedVault = {
    {"sv1", "The museum keeps its old coins in a vault below the square."},
    {"sv2", "Every clerk at the harbor office chooses a new password each spring."},
    {"sv3", "The bakery oven has a timer, and the bakery door a lock without a password."},
};
const char* const kReuseModes[] = {"none", "prefix", "knowledge_tree", "cacheblend", "epic"};
const char* const kOverlaps[] = {"none", "piperag", "speculative", "both"};
constexpr int kMaxTokens = 4;

struct Tenant {
  std::string name, key;
};
const Tenant kA{"alpha", "key-a"}, kB{"beta", "key-b"}, kD{"delta", "key-d"};

std::string bin_dir() {
  const char* e = std::getenv("RAGD_E2E_BIN_DIR");
  return e && *e ? std::string(e) : kBin;
}

enum class Route { kRest, kSse, kWs, kChat };
const Route kRoutes[] = {Route::kRest, Route::kSse, Route::kWs, Route::kChat};
const char* route_name(Route r) {
  switch (r) {
    case Route::kRest: return "rest";
    case Route::kSse: return "sse";
    case Route::kWs: return "ws";
    case Route::kChat: return "chat";
  }
  return "?";
}

enum class Kind { kOneShot, kRerank, kIterative };
const Kind kKinds[] = {Kind::kOneShot, Kind::kRerank, Kind::kIterative};
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kOneShot: return "oneshot";
    case Kind::kRerank: return "rerank";
    case Kind::kIterative: return "iter";
  }
  return "?";
}

// A pipeline spec file. nprobe 8 = every list of the IVF8 index: the last stage of a progressive
// search is exact, so speculative prefill must end on the sources of a plain run.
std::string spec_text(Kind k, const std::string& reuse, const std::string& overlap, bool spec_prefill) {
  std::string s = "[retriever]\ntop_k = 4\nnprobe = 8\n";
  if (k == Kind::kRerank) s += "rerank = 1\n";
  if (spec_prefill) s += "speculative_prefill = true\n";
  s += "[reuse]\nmode = \"" + reuse + "\"\n";
  // Retrieval every 2 tokens: with 4 tokens, one search during generation.
  if (k == Kind::kIterative) s += "[iterative]\nretrieval_interval = 2\nquery_window = 2\noverlap = \"" + overlap + "\"\n";
  s += "[generation]\nmax_tokens = " + std::to_string(kMaxTokens) + "\ntemperature = 0.0\n";
  return s;
}

// The chat route takes no ragd run fields, so each flag combination it serves is a pipeline of
// its own. Not written: rerank with speculative_prefill (a spec error) and iterative with it
// (a one-shot flag).
std::string chat_pipeline(Kind k, const std::string& reuse, const std::string& overlap, bool sp) {
  switch (k) {
    case Kind::kOneShot: return "c-oneshot-" + reuse + (sp ? "-sp1" : "-sp0");
    case Kind::kRerank: return "c-rerank-" + reuse;
    case Kind::kIterative: return "c-iter-" + overlap + "-" + reuse;
  }
  return "";
}

void write_pipelines(const fs::path& dir) {
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir / (name + ".toml")) << text; };
  write("iso-rerank", spec_text(Kind::kRerank, "knowledge_tree", "", false));
  write("iso-iter", spec_text(Kind::kIterative, "knowledge_tree", "none", false));
  for (const char* r : kReuseModes) {
    for (bool sp : {false, true}) write(chat_pipeline(Kind::kOneShot, r, "", sp), spec_text(Kind::kOneShot, r, "", sp));
    write(chat_pipeline(Kind::kRerank, r, "", false), spec_text(Kind::kRerank, r, "", false));
    for (const char* o : kOverlaps) write(chat_pipeline(Kind::kIterative, r, o, false), spec_text(Kind::kIterative, r, o, false));
  }
}

// The pipeline a body route names (flags go in the body).
std::string base_pipeline(Kind k) {
  switch (k) {
    case Kind::kOneShot: return "default";
    case Kind::kRerank: return "iso-rerank";
    case Kind::kIterative: return "iso-iter";
  }
  return "";
}

struct Case {
  Kind kind = Kind::kOneShot;
  std::string reuse;         // "" = the pipeline's
  std::string overlap;       // iterative only; "" = the pipeline's
  bool spec_prefill = false;
  int top_k = 4;
  std::string must_include;  // context_must_include; "" = none

  std::string name() const {
    std::string n = std::string(kind_name(kind)) + " reuse=" + (reuse.empty() ? "-" : reuse);
    if (kind == Kind::kIterative) n += " overlap=" + (overlap.empty() ? "-" : overlap);
    n += " speculative_prefill=" + std::string(spec_prefill ? "true" : "false") + " top_k=" + std::to_string(top_k);
    if (!must_include.empty()) n += " context_must_include=" + must_include;
    return n;
  }
  bool exact() const { return reuse != "cacheblend" && reuse != "epic"; }
  // Sources per context of a served run.
  size_t expected_sources() const { return kind == Kind::kRerank ? 1u : static_cast<size_t>(top_k); }
  // A combination the API may refuse outright (speculative prefill is a one-shot, rerank-free
  // feature); refused, it must be refused for every tenant alike.
  bool may_be_refused() const { return spec_prefill && kind != Kind::kOneShot; }
  std::string fields() const {
    std::string f = R"("query":")" + kQuery + R"(","top_k":)" + std::to_string(top_k) +
                    R"(,"max_tokens":)" + std::to_string(kMaxTokens) + R"(,"temperature":0)";
    if (!reuse.empty()) f += R"(,"reuse":")" + reuse + "\"";
    if (!overlap.empty()) f += R"(,"overlap":")" + overlap + "\"";
    f += std::string(R"(,"speculative_prefill":)") + (spec_prefill ? "true" : "false");
    if (!must_include.empty()) f += R"(,"context_must_include":")" + must_include + "\"";
    return f;
  }
};

struct SourceRef {
  std::string doc_id;
  int64_t chunk_id = -1;
  bool operator==(const SourceRef&) const = default;
};

struct Outcome {
  int status = 0;          // HTTP status; on a stream that ends in an error event, the error's
  std::string error_code;  // the error's code, "" when served
  std::string raw;         // every byte of the answer the client read (body or frames)
  std::vector<std::vector<SourceRef>> contexts;  // the first context, then later ones (iterative)
  std::string output;
  std::vector<int64_t> token_ids;  // SSE and WebSocket
  int64_t prompt_tokens = -1, reused = -1;
  int64_t restarts = 0;  // usage.prefill_restarts: speculative prefill's candidates changed

  bool served() const { return status == 200 && error_code.empty(); }
  std::vector<std::string> doc_ids(size_t ctx = 0) const {
    std::vector<std::string> ids;
    if (ctx < contexts.size())
      for (const auto& s : contexts[ctx]) ids.push_back(s.doc_id);
    return ids;
  }
};

std::string clip(const std::string& s, size_t n = 600) {
  return s.size() <= n ? s : s.substr(0, n) + "...(" + std::to_string(s.size()) + " bytes)";
}
std::string join(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s + "]";
}

// The HTTP status of an error code, for stream error events that carry no status.
int status_of_code(const std::string& code) {
  static const std::map<std::string, int> kCodes = {
      {"invalid_request", 400}, {"unauthorized", 401}, {"forbidden", 403}, {"not_found", 404},
      {"document_not_found", 404}, {"pipeline_not_found", 404}, {"already_exists", 409},
      {"failed_precondition", 409}, {"overloaded", 429}, {"cancelled", 499}, {"internal", 500},
      {"unimplemented", 501}, {"unavailable", 503}, {"not_ready", 503}};
  auto it = kCodes.find(code);
  return it == kCodes.end() ? 500 : it->second;
}

void read_sources(const Json& j, const std::string& ptr, Outcome* o) {
  std::vector<SourceRef> ctx;
  if (j.has(ptr))
    for (size_t i = 0, n = j.size(ptr); i < n; ++i) {
      const std::string p = ptr + "/" + std::to_string(i);
      ctx.push_back({j.has(p + "/doc_id") ? j.str(p + "/doc_id") : "", j.has(p + "/chunk_id") ? j.num(p + "/chunk_id") : -1});
    }
  o->contexts.push_back(std::move(ctx));
}
void read_usage(const Json& j, const std::string& ptr, Outcome* o) {
  if (!j.has(ptr + "/reused_tokens")) return;
  o->reused = 0;
  for (const char* t : {"hbm", "dram", "ssd"})
    if (j.has(ptr + "/reused_tokens/" + t)) o->reused += j.num(ptr + "/reused_tokens/" + t);
  if (j.has(ptr + "/prompt_tokens")) o->prompt_tokens = j.num(ptr + "/prompt_tokens");
  if (j.has(ptr + "/prefill_restarts")) o->restarts = j.num(ptr + "/prefill_restarts");
}
void read_error(const Json& j, Outcome* o) {
  o->error_code = j.has("/error/code") ? j.str("/error/code") : "unknown";
  if (o->status == 200 || o->status == 0) o->status = j.has("/error/status") ? static_cast<int>(j.num("/error/status")) : status_of_code(o->error_code);
}
// One event of an SSE stream or a WebSocket.
void on_event(const std::string& event, const std::string& data, Outcome* o) {
  o->raw += data;
  o->raw += '\n';
  Json j(data);
  if (!j.ok) return;
  if (event == "sources") {
    read_sources(j, "/sources", o);
  } else if (event == "token") {
    if (j.has("/text")) o->output += j.str("/text");
    if (j.has("/token_id")) o->token_ids.push_back(j.num("/token_id"));
  } else if (event == "done") {
    read_usage(j, "/usage", o);
  } else if (event == "error") {
    read_error(j, o);
  }
}

class TenantIsolationTest : public E2eTest {
 protected:
  static void SetUpTestSuite() {
    E2eTest::SetUpTestSuite();
    setup_error_.clear();
    if (dir_.empty() || !model_ok_) return;
    // Shared corpus: 320 one-chunk documents, enough to train IVF8 (8 lists x 30 points).
    std::mt19937 rng(7);
    const std::vector<std::string> adj = {"green", "quiet", "ancient", "busy", "small", "bright", "northern", "wooden"};
    const std::vector<std::string> noun = {"river", "market", "library", "farmer", "engine", "bridge",
                                           "orchard", "harbor", "teacher", "mountain", "bakery", "lighthouse"};
    const std::vector<std::string> verb = {"watches", "crosses", "feeds", "repairs", "paints", "visits", "follows"};
    const std::vector<std::string> place = {"village", "valley", "coast", "station", "forest", "square", "island"};
    auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
    {
      std::ofstream out(dir_ / "iso_corpus.jsonl");
      for (int i = 0; i < 320; ++i) {
        std::string text;
        for (int s = 0; s < 2; ++s)
          text += "The " + pick(adj) + " " + pick(noun) + " " + pick(verb) + " the " + pick(noun) + " near the " +
                  pick(place) + ". ";
        out << R"({"id":"s)" << i << R"(","text":")" << text << "\"}\n";
      }
      for (const auto& [id, text] : kSharedVault) out << R"({"id":")" << id << R"(","text":")" << text << "\"}\n";
    }
    write_pipelines(dir_ / "iso_pipelines");
    for (const auto& [data, index] : {std::pair<std::string, std::string>{"iso_ivf_seed", "IVF8,Flat"}, {"iso_flat_seed", "Flat"}}) {
      const std::string cmd = "'" + bin_dir() + "/ragctl' ingest '" + (dir_ / "iso_corpus.jsonl").string() + "' --data '" +
                              (dir_ / data).string() + "' --model '" + (dir_ / "model").string() + "' --index " + index +
                              " -q 2>&1";
      std::string out;
      if (FILE* p = popen(cmd.c_str(), "r")) {
        char buf[512];
        while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
        if (pclose(p) != 0) setup_error_ += cmd + " failed: " + out + "\n";
      }
      // IVF serves exact (staging) search until trained: the progressive search needs it trained.
      if (out.find("index " + index + " (trained)") == std::string::npos)
        setup_error_ += "ingest did not report a trained " + index + " index: " + out + "\n";
    }
  }

  // A daemon on a copy of a seeded data directory, with tenants A, B and D (+ `extra` keys), then
  // the tenants' documents.
  void start(const std::string& seed, const std::string& data, const std::vector<std::string>& extra = {}) {
    ASSERT_EQ(setup_error_, "");
    fs::remove_all(dir_ / data);
    fs::copy(dir_ / seed, dir_ / data, fs::copy_options::recursive);
    std::vector<std::string> args = {bin_dir() + "/ragd", "--model", (dir_ / "model").string(), "--data",
                                     (dir_ / data).string(), "--listen", "127.0.0.1:0", "--threads", "2",
                                     "--pipelines", (dir_ / "iso_pipelines").string(), "--admin-key", "key-root=ops"};
    for (const Tenant* t : {&kA, &kB, &kD}) {
      args.push_back("--api-key");
      args.push_back(t->key + "=" + t->name);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    std::string err;
    ASSERT_TRUE(d_.start(args, &err, (dir_ / (data + ".log")).string())) << err;
    ASSERT_TRUE(wait_for([&] { return get("/readyz").status == 200; }, 60000)) << "never ready";
    upload(kA, kDocsA);
    upload(kB, kDocsB);
    upload(kD, kDocsB);
    // A's chunk ids: a leak shows as one of them even under another document id.
    for (const auto& [id, text] : kDocsA) {
      auto r = call("GET", "/v1/documents/" + id, "", auth(kA));
      ASSERT_EQ(r.status, 200) << r.body;
      Json j(r.body);
      for (size_t i = 0; i < j.size("/chunk_ids"); ++i) a_chunks_.insert(j.num("/chunk_ids/" + std::to_string(i)));
    }
    ASSERT_FALSE(a_chunks_.empty());
  }
  void upload(const Tenant& t, const std::vector<std::pair<std::string, std::string>>& docs) {
    std::string body = R"({"documents":[)";
    for (size_t i = 0; i < docs.size(); ++i)
      body += (i ? "," : "") + std::string(R"({"id":")") + docs[i].first + R"(","text":")" + docs[i].second + "\"}";
    auto r = call("POST", "/v1/documents", body + "]}", auth(t));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  static daemon::Headers auth(const Tenant& t) { return {{"Authorization", "Bearer " + t.key}}; }

  // One run of `pipeline` with the run fields `fields` (a JSON object's members) on a route. The
  // chat route takes the query, top_k and max_tokens from `fields`' case only (see run()).
  Outcome send(Route route, const Tenant& t, const std::string& pipeline, const std::string& fields) {
    Outcome o;
    if (route == Route::kRest || route == Route::kChat) {
      auto r = route == Route::kRest ? call("POST", "/v1/pipelines/" + pipeline + "/runs", "{" + fields + "}", auth(t))
                                     : call("POST", "/v1/chat/completions", "{" + fields + "}", auth(t));
      o.status = r.status;
      o.raw = r.body;
      Json j(r.body);
      if (!j.ok) return o;
      if (r.status != 200) {
        read_error(j, &o);
        return o;
      }
      const std::string base = route == Route::kRest ? "" : "/ragd";
      read_sources(j, base + "/sources", &o);
      if (j.has("/context_changes"))
        for (size_t i = 0; i < j.size("/context_changes"); ++i)
          read_sources(j, "/context_changes/" + std::to_string(i) + "/sources", &o);
      read_usage(j, base + "/usage", &o);
      const std::string out = route == Route::kRest ? "/output" : "/choices/0/message/content";
      if (j.has(out)) o.output = j.str(out);
      return o;
    }
    if (route == Route::kSse) {
      daemon::SseParser p([&](const std::string& e, const std::string& d) { on_event(e, d, &o); });
      HttpClient c("127.0.0.1", d_.port(), 60000);
      auto r = c.request_stream("POST", "/v1/pipelines/" + pipeline + "/runs", "{" + fields + R"(,"stream":true})",
                                auth(t), [&](std::string_view d) {
                                  p.feed(d);
                                  return true;
                                });
      if (!r.ok()) return o;
      if (o.status == 0) o.status = r->status;  // not overwritten by an error event
      if (r->status != 200) {
        o.status = r->status;
        o.raw += r->body;
      }
      return o;
    }
    WsClient ws;
    if (!ws.connect("127.0.0.1", d_.port(), "/v1/stream?api_key=" + t.key).ok()) return o;
    if (!ws.send_text(R"({"type":"run","pipeline":")" + pipeline + "\"," + fields + "}").ok()) return o;
    o.status = 200;
    for (;;) {
      auto m = ws.read(60000);
      if (!m.ok() || m->kind != WsClient::Message::Kind::kText) {
        o.status = 0;
        o.error_code = "websocket closed or silent";
        return o;
      }
      Json j(m->text);
      const std::string ev = j.ok && j.has("/event") ? j.str("/event") : "";
      on_event(ev, m->text, &o);
      if (ev == "done" || ev == "error") return o;
    }
  }
  // extra: more body fields (",\"cache_salt\":...").
  Outcome run(Route route, const Tenant& t, const Case& c, const std::string& extra = "") {
    if (route != Route::kChat) return send(route, t, base_pipeline(c.kind), c.fields() + extra);
    return send(route, t, "",
                R"("messages":[{"role":"user","content":")" + kQuery + R"("}],"pipeline":")" +
                    chat_pipeline(c.kind, c.reuse, c.overlap, c.spec_prefill) + R"(","retrieval_top_k":)" +
                    std::to_string(c.top_k) + R"(,"max_tokens":)" + std::to_string(kMaxTokens) + R"(,"temperature":0)" +
                    extra);
  }

  // What of A's reached an answer: document ids, chunk ids, the secret.
  std::vector<std::string> leaks(const Outcome& o) const {
    std::vector<std::string> found;
    std::set<std::string> a_ids;
    for (const auto& [id, text] : kDocsA) a_ids.insert(id);
    for (const auto& ctx : o.contexts)
      for (const auto& s : ctx)
        if (a_ids.count(s.doc_id) || a_chunks_.count(s.chunk_id))
          found.push_back("source " + s.doc_id + "#" + std::to_string(s.chunk_id));
    if (o.raw.find(kSecret) != std::string::npos) found.push_back("the secret '" + kSecret + "'");
    for (const auto& id : a_ids)
      if (o.raw.find("\"" + id + "\"") != std::string::npos) found.push_back("the id \"" + id + "\"");
    return found;
  }
  bool has_a_document(const Outcome& o) const {
    for (const auto& ctx : o.contexts)
      for (const auto& s : ctx)
        if (a_chunks_.count(s.chunk_id)) return true;
    return false;
  }

  // A failed check: reported with the case (SCOPED_TRACE) and kept per kind of failure for the
  // summary; full answers for the first few of each kind only, to keep the log readable.
  void fail(const std::string& what, const std::string& case_name, const std::string& detail) {
    auto& v = findings_[what];
    v.push_back(case_name);
    if (v.size() <= 3) ADD_FAILURE() << what << ": " << detail;
    else ADD_FAILURE() << what;
  }
  void print_summary(size_t cases) const {
    std::cout << "[ summary  ] " << cases << " cases\n";
    for (const auto& [what, v] : findings_) {
      std::cout << "[ summary  ] " << v.size() << " x " << what << "\n";
      for (size_t i = 0; i < v.size() && i < 6; ++i) std::cout << "[ summary  ]     " << v[i] << "\n";
    }
  }

  std::set<int64_t> a_chunks_;
  std::map<std::string, std::vector<std::string>> findings_;
  static inline std::string setup_error_;
};

// The enumeration, once per retrieval mode (the daemon's runtime.retrieval_mode).
class TenantIsolationModeTest : public TenantIsolationTest, public ::testing::WithParamInterface<const char*> {};

// The enumeration on the IVF index: per case and route, D runs, A runs (positive control), B runs.
TEST_P(TenantIsolationModeTest, NoPipelineFlagOrRouteShowsBAnythingOfA) {
  const std::string mode = GetParam();
  ASSERT_NO_FATAL_FAILURE(start("iso_ivf_seed", "iso_enum_" + mode, {"--set", "runtime.retrieval_mode=" + mode}));
  std::vector<Case> cases;
  for (Kind k : kKinds)
    for (const char* reuse : kReuseModes)
      for (const char* overlap : kOverlaps) {
        if (k != Kind::kIterative && std::string(overlap) != "none") continue;
        for (int top_k : {1, 4})
          for (bool sp : {false, true})  // false first: the sp=true case is compared with it
            cases.push_back({k, reuse, k == Kind::kIterative ? overlap : "", sp, top_k, ""});
      }
  // context_must_include naming A's document, from B: refused (4xx), nothing of A's shown.
  for (Kind k : kKinds)
    for (const char* overlap : kOverlaps) {
      if (k != Kind::kIterative && std::string(overlap) != "none") continue;
      for (int top_k : {1, 4})
        for (bool sp : {false, true})
          cases.push_back({k, "", k == Kind::kIterative ? overlap : "", sp, top_k, "vault-backup"});
    }
  size_t n = 0;
  std::map<std::string, Outcome> b_plain;  // B's speculative_prefill=false answer, by route + case
  std::set<std::string> a_ran;             // cases A ran on an earlier route
  for (Route route : kRoutes)
    for (const Case& c : cases) {
      if (route == Route::kChat && (!c.must_include.empty() || (c.spec_prefill && c.kind != Kind::kOneShot)))
        continue;  // not expressible through the chat route (see chat_pipeline())
      ++n;
      const std::string name = std::string(route_name(route)) + " " + c.name();
      SCOPED_TRACE(name);
      // The pipeline's head (server configuration, shared by every scope) is computed once before
      // the three runs, under a salt of D's own: D and B then both find it, and only it, cached.
      run(route, kD, c, R"(,"cache_salt":"warm-)" + std::to_string(n) + "\"");
      const Outcome d = run(route, kD, c), a = run(route, kA, c), b = run(route, kB, c);
      if (auto l = leaks(b); !l.empty()) fail("B saw A's document", name, join(l) + " in " + clip(b.raw));
      if (!c.must_include.empty()) {
        if (b.status < 400 || b.status >= 500)
          fail("context_must_include of A's document: not a 4xx", name,
               "status " + std::to_string(b.status) + " " + b.error_code + ": " + clip(b.raw));
        if (!a.served() || !has_a_document(a))
          fail("positive control: A's context_must_include of its own document", name, clip(a.raw));
        continue;
      }
      if (c.may_be_refused() && !a.served() && a.status >= 400 && a.status < 500) {
        if (b.status != a.status) fail("refused for A but not alike for B", name, clip(b.raw));
        continue;
      }
      if (!a.served() || !has_a_document(a)) fail("positive control: A retrieves its own document", name, clip(a.raw));
      // A's top 4 is A's own: ahead of everything B sees, so B's full top 4 below shows the filter
      // inside the match.
      if (a.served() && c.kind == Kind::kOneShot && c.top_k == 4 && !a.contexts.empty() &&
          (a.contexts[0].size() != 4 ||
           !std::all_of(a.contexts[0].begin(), a.contexts[0].end(), [&](const SourceRef& s) { return a_chunks_.count(s.chunk_id) > 0; })))
        fail("control: A's top 4 is not A's own documents", name, join(a.doc_ids()));
      if (!b.served()) {
        fail("B's run failed", name, clip(b.raw));
        continue;
      }
      for (size_t i = 0; i < b.contexts.size(); ++i)
        if (b.contexts[i].size() != c.expected_sources())
          fail("B's context has the wrong number of sources", name,
               "context " + std::to_string(i) + " has " + join(b.doc_ids(i)) + ", expected " +
                   std::to_string(c.expected_sources()));
      if (b.contexts.empty()) fail("B's answer has no sources", name, clip(b.raw));
      // The mirror tenant: the same documents and history, without A's run in between.
      if (b.doc_ids() != d.doc_ids() || b.prompt_tokens != d.prompt_tokens)
        fail("B's context differs from its mirror D's", name,
             "B " + join(b.doc_ids()) + " " + std::to_string(b.prompt_tokens) + " prompt tokens, D " +
                 join(d.doc_ids()) + " " + std::to_string(d.prompt_tokens));
      // A restarted prefill drops its reuse plan at a moment that depends on timing, so reuse
      // is compared only between runs that did not restart.
      if (b.restarts == 0 && d.restarts == 0 && b.reused != d.reused)
        fail("B reused other KV than its mirror D (KV computed for A?)", name,
             "B reused " + std::to_string(b.reused) + ", D " + std::to_string(d.reused));
      const std::string key = c.name();
      if (c.reuse != "none" && a_ran.count(key) && a.restarts == 0 && a.reused <= 0)
        fail("positive control: A reuses its own KV on a repeated run", name, clip(a.raw));
      a_ran.insert(key);
      Case plain = c;
      plain.spec_prefill = false;
      const std::string pkey = std::string(route_name(route)) + " " + plain.name();
      if (!c.spec_prefill) {
        b_plain[pkey] = b;
      } else if (auto it = b_plain.find(pkey); it != b_plain.end()) {
        const Outcome& p = it->second;
        if (b.contexts != p.contexts || b.prompt_tokens != p.prompt_tokens)
          fail("speculative_prefill changed B's sources", name,
               "with " + join(b.doc_ids()) + " (" + std::to_string(b.prompt_tokens) + " prompt tokens), without " +
                   join(p.doc_ids()) + " (" + std::to_string(p.prompt_tokens) + ")");
        if (c.exact() && b.output != p.output)
          fail("speculative_prefill changed B's output", name, "'" + b.output + "' vs '" + p.output + "'");
      }
    }
  print_summary(n);
  EXPECT_EQ(d_.stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, TenantIsolationModeTest, ::testing::Values("dense", "lexical", "hybrid"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// A tenant's first run after A ran the same request (shared documents only, so that the KV could
// serve both) reuses nothing; A's own repeat reuses (control). One fresh tenant per case.
TEST_F(TenantIsolationTest, FreshTenantReusesNoKvOfAnotherTenant) {
  std::vector<std::pair<Route, Case>> cases;
  for (Route route : {Route::kRest, Route::kChat})
    for (Kind k : kKinds)
      for (const char* reuse : kReuseModes)
        for (bool sp : {false, true}) {
          if (route == Route::kChat && sp && k != Kind::kOneShot) continue;
          cases.push_back({route, Case{k, reuse, k == Kind::kIterative ? "none" : "", sp, 1, ""}});
        }
  std::vector<std::string> keys;
  for (size_t i = 0; i < cases.size(); ++i) {
    keys.push_back("--api-key");
    keys.push_back("key-f" + std::to_string(i) + "=fresh" + std::to_string(i));
  }
  ASSERT_NO_FATAL_FAILURE(start("iso_ivf_seed", "iso_fresh", keys));
  // A shared sentence, word for word: top_k 1 retrieves it for every tenant.
  std::string shared;
  {
    auto r = call("GET", "/v1/documents/s17", "", auth(kA));
    ASSERT_EQ(r.status, 200) << r.body;
    shared = Json(r.body).str("/text");
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Route route = cases[i].first;
    const Case& c0 = cases[i].second;
    const std::string name = std::string(route_name(route)) + " " + c0.name();
    SCOPED_TRACE(name);
    Case c = c0;
    std::string fields = c.fields();
    fields.replace(fields.find(kQuery), kQuery.size(), shared);
    auto go = [&](const Tenant& t, const std::string& extra = "") {
      if (route == Route::kRest) return send(route, t, base_pipeline(c.kind), fields + extra);
      return send(route, t, "",
                  R"("messages":[{"role":"user","content":")" + shared + R"("}],"pipeline":")" +
                      chat_pipeline(c.kind, c.reuse, c.overlap, c.spec_prefill) +
                      R"(","retrieval_top_k":1,"max_tokens":)" + std::to_string(kMaxTokens) + R"(,"temperature":0)" + extra);
    };
    const Tenant fresh{"fresh" + std::to_string(i), "key-f" + std::to_string(i)};
    const Outcome a1 = go(kA), a2 = go(kA), f = go(fresh);
    // What any scope may reuse of A's work: the pipeline's own head (server configuration), as A
    // itself under another cache_salt does. Documents never.
    const Outcome head = go(kA, R"(,"cache_salt":"control-)" + std::to_string(i) + "\"");
    if (c.may_be_refused() && !a1.served() && a1.status >= 400 && a1.status < 500) {
      EXPECT_EQ(f.status, a1.status) << f.raw;
      continue;
    }
    ASSERT_TRUE(a1.served() && a2.served() && f.served()) << a1.raw << "\n" << f.raw;
    EXPECT_EQ(f.doc_ids(), std::vector<std::string>{"s17"}) << f.raw;
    if (c.reuse != "none" && a2.restarts == 0) {
      EXPECT_GT(a2.reused, head.reused) << "control: A reuses its own documents' KV: " << a2.raw;
    }
    if (f.reused > head.reused) fail("a fresh tenant reused KV computed for A's documents", name, clip(f.raw));
  }
  print_summary(cases.size());
  EXPECT_EQ(d_.stop(), 0);
}

// On a Flat index speculative prefill has one stage: the run must be the plain run, for every
// pipeline this file uses (greedy): the same sources, prompt and tokens, on SSE (token ids) and on
// the chat route (pipelines with the flag in the spec against their twins without).
TEST_F(TenantIsolationTest, SpeculativePrefillOnFlatIndexChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(start("iso_flat_seed", "iso_flat"));
  auto r = call("GET", "/v1/pipelines", "", auth(kA));
  ASSERT_EQ(r.status, 200) << r.body;
  Json list(r.body);
  size_t n = 0;
  for (size_t i = 0; i < list.size("/data"); ++i) {
    const std::string p = "/data/" + std::to_string(i);
    const std::string name = list.str(p + "/name");
    const bool iterative = list.str(p + "/kind") == "iterative";
    const bool rerank = name.find("rerank") != std::string::npos;
    const bool exact = name.find("cacheblend") == std::string::npos && name.find("epic") == std::string::npos;
    for (int top_k : {1, 4}) {
      ++n;
      const std::string where = name + " top_k=" + std::to_string(top_k);
      SCOPED_TRACE(where);
      const std::string fields = R"("query":")" + kQuery + R"(","top_k":)" + std::to_string(top_k) +
                                 R"(,"max_tokens":)" + std::to_string(kMaxTokens) + R"(,"temperature":0)";
      const Outcome plain = send(Route::kSse, kA, name, fields + R"(,"speculative_prefill":false)");
      const Outcome spec = send(Route::kSse, kA, name, fields + R"(,"speculative_prefill":true)");
      ASSERT_TRUE(plain.served()) << plain.raw;
      if ((iterative || rerank) && !spec.served() && spec.status >= 400 && spec.status < 500) continue;  // refused
      if (!spec.served()) {
        fail("speculative_prefill run failed", where, clip(spec.raw));
        continue;
      }
      if (spec.contexts != plain.contexts || spec.prompt_tokens != plain.prompt_tokens)
        fail("speculative_prefill changed the sources", where,
             "with " + join(spec.doc_ids()) + " (" + std::to_string(spec.prompt_tokens) + " prompt tokens), without " +
                 join(plain.doc_ids()) + " (" + std::to_string(plain.prompt_tokens) + ")");
      if (exact && spec.token_ids != plain.token_ids)
        fail("speculative_prefill changed the tokens", where, "'" + spec.output + "' vs '" + plain.output + "'");
    }
  }
  // The spec-level flag, through the chat route.
  for (const char* reuse : kReuseModes)
    for (int top_k : {1, 4}) {
      ++n;
      Case c{Kind::kOneShot, reuse, "", false, top_k, ""};
      SCOPED_TRACE("chat " + c.name());
      const Outcome plain = run(Route::kChat, kA, c);
      c.spec_prefill = true;
      const Outcome spec = run(Route::kChat, kA, c);
      ASSERT_TRUE(plain.served() && spec.served()) << plain.raw << "\n" << spec.raw;
      if (spec.contexts != plain.contexts || spec.prompt_tokens != plain.prompt_tokens)
        fail("speculative_prefill changed the sources", "chat " + c.name(),
             "with " + join(spec.doc_ids()) + " (" + std::to_string(spec.prompt_tokens) + " prompt tokens), without " +
                 join(plain.doc_ids()) + " (" + std::to_string(plain.prompt_tokens) + ")");
      if (c.exact() && spec.output != plain.output)
        fail("speculative_prefill changed the tokens", "chat " + c.name(), "'" + spec.output + "' vs '" + plain.output + "'");
    }
  print_summary(n);
  EXPECT_EQ(d_.stop(), 0);
}

}  // namespace
}  // namespace ragd::testing

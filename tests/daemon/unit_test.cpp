// Config, JSON writer, metrics registry, URL and SSE parsing.
#include <fstream>

#include "ragd/common/enum_names.h"
#include "ragd/daemon/client.h"
#include "ragd/daemon/config.h"
#include "ragd/common/json_writer.h"
#include "ragd/daemon/metrics.h"
#include "ragd/kernels/cpu_features.h"
#include "ragd/kernels/weight_matrix.h"
#include "run_events.h"
#include "test_util.h"

namespace ragd::testing {
namespace {

using namespace ragd::daemon;

TEST(Config, ShippedFileEqualsDefaults) {
  // configs/ragd.toml documents every option with its default: parsing it changes nothing.
  DaemonConfig cfg;
  Status st = load_config_file(cfg, RAGD_SOURCE_DIR "/configs/ragd.toml");
  ASSERT_TRUE(st.ok()) << st.to_string();
  const DaemonConfig defaults;
  EXPECT_EQ(to_toml(cfg, true), to_toml(defaults, true));
  // ... and mentions every key.
  std::ifstream in(RAGD_SOURCE_DIR "/configs/ragd.toml");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  for (const auto& k : config_keys()) {
    std::string leaf = k.substr(k.rfind('.') + 1);
    EXPECT_NE(text.find("\n" + leaf + " = "), std::string::npos) << k;
  }
}

TEST(Config, PrintedConfigRoundTrips) {
  DaemonConfig a;
  a.server.listen = "0.0.0.0:9999";
  a.server.threads = 7;
  a.runtime.scheduler.max_running = 33;
  a.runtime.model.kv_pool_bytes = 129ull << 20;
  a.runtime.model_dir = "/models/with \"quote\"";
  a.auth.keys["sk-test-1"] = "acme";
  a.limits.tenants["acme"].max_concurrent = 3;
  DaemonConfig b;
  Status st = apply_toml(b, to_toml(a, true));
  ASSERT_TRUE(st.ok()) << st.to_string() << "\n" << to_toml(a, true);
  EXPECT_EQ(to_toml(a, true), to_toml(b, true));
  EXPECT_EQ(b.runtime.model_dir, "/models/with \"quote\"");
  EXPECT_EQ(b.auth.keys.at("sk-test-1"), "acme");
  EXPECT_EQ(b.limits.tenants.at("acme").max_concurrent, 3);
}

TEST(Config, SecretsMaskedUnlessAsked) {
  DaemonConfig a;
  a.auth.keys["sk-very-secret"] = "acme";
  EXPECT_EQ(to_toml(a).find("sk-very-secret"), std::string::npos);
  EXPECT_NE(to_toml(a, true).find("sk-very-secret"), std::string::npos);
}

TEST(Config, WrongTypeNamesKey) {
  DaemonConfig c;
  Status st = apply_toml(c, "[server]\nthreads = \"four\"\n", "x.toml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("x.toml: server.threads: expected integer, got string"), std::string::npos) << st.message();
}

TEST(Config, UnknownKeyNamed) {
  DaemonConfig c;
  Status st = apply_toml(c, "[server]\nthreadz = 4\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("server.threadz: unknown key"), std::string::npos) << st.message();
}

TEST(Config, SyntaxErrorHasLine) {
  DaemonConfig c;
  Status st = apply_toml(c, "[server]\nthreads = = 4\n", "bad.toml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bad.toml:2:"), std::string::npos) << st.message();
}

TEST(Config, NegativeSizeRejected) {
  DaemonConfig c;
  Status st = apply_toml(c, "[runtime]\nkv_pool_bytes = -5\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("runtime.kv_pool_bytes: must be >= 0"), std::string::npos) << st.message();
}

TEST(Config, RangeValidated) {
  DaemonConfig c;
  Status st = apply_toml(c, "[runtime]\nmax_running = 0\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("runtime.max_running: must be > 0"), std::string::npos) << st.message();
}

TEST(Config, BadListenPort) {
  DaemonConfig c;
  Status st = apply_override(c, "server.listen", "127.0.0.1:70000");
  ASSERT_TRUE(st.ok());
  st = validate(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("port must be 0..65535"), std::string::npos) << st.message();
}

TEST(Config, OverridesParseByType) {
  DaemonConfig c;
  ASSERT_TRUE(apply_override(c, "server.threads", "12").ok());
  EXPECT_EQ(c.server.threads, 12);
  ASSERT_TRUE(apply_override(c, "runtime.scheduler", "fair").ok());
  EXPECT_EQ(c.runtime.scheduler.policy, pipelines::SchedPolicy::kFair);
  Status st = apply_override(c, "server.threads", "12x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("server.threads: expected integer, got '12x'"), std::string::npos);
  st = apply_override(c, "nope.key", "1");
  EXPECT_NE(st.message().find("nope.key: unknown config key"), std::string::npos);
}

// Enum-valued keys are parsed when the config is read, by the enum's one name table: a bad name
// is refused at --set (and in a file) with the key and the choices, --print-config prints the
// names the runtime gets, and every name of every table is accepted.
struct EnumKeyCase {
  const char* key;
  const char* good;     // a non-default name
  const char* choices;  // as the error lists them
};
const EnumKeyCase kEnumKeys[] = {
    {"log_level", "debug", "trace | debug | info | warn | error | off"},
    {"runtime.weights", "q8", "auto | f32 | bf16 | f16 | q8"},
    {"runtime.kv_dtype", "bf16", "f32 | bf16 | int8"},
    {"runtime.scheduler", "fair", "fcfs | sjf | mlfq | fair | srtf"},
    {"runtime.eviction", "lru", "pgdsf | lru | lfu | gdsf"},
    {"runtime.preemption", "recompute", "swap | recompute"},
    {"runtime.sp_partition", "striped", "zigzag | contiguous | striped"},
    {"runtime.sp_transport", "nccl", "host | nccl"},
    {"runtime.embedder", "model", "auto | hashing | termvec | model"},
};

TEST(Config, EveryEnumKeyRejectsABadNameAtSet) {
  for (const EnumKeyCase& k : kEnumKeys) {
    SCOPED_TRACE(k.key);
    DaemonConfig c;
    Status st = apply_override(c, k.key, "fp8");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(), std::string(k.key) + " must be one of " + k.choices + "; got 'fp8'");
    EXPECT_EQ(to_toml(c), to_toml(DaemonConfig{}));  // nothing half-applied
    // The same key in a file: the same message, after the file's name.
    const std::string key(k.key);
    const size_t dot = key.find('.');
    const std::string text = dot == std::string::npos ? key + " = \"fp8\"\n"
                                                      : "[" + key.substr(0, dot) + "]\n" + key.substr(dot + 1) + " = \"fp8\"\n";
    st = apply_toml(c, text, "x.toml");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message(), "x.toml: " + std::string(k.key) + " must be one of " + k.choices + "; got 'fp8'");
    const std::string wrong_type = dot == std::string::npos ? key + " = 3\n" : "[" + key.substr(0, dot) + "]\n" + key.substr(dot + 1) + " = 3\n";
    st = apply_toml(c, wrong_type, "x.toml");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(std::string(k.key) + ": expected a string (" + k.choices + "), got integer"), std::string::npos)
        << st.message();
  }
}

TEST(Config, EveryEnumNameIsAcceptedAndPrintedBack) {
  for (const EnumKeyCase& k : kEnumKeys) {
    SCOPED_TRACE(k.key);
    std::string choices = k.choices;
    for (size_t b = 0; b < choices.size();) {
      size_t e = choices.find(" | ", b);
      const std::string name = choices.substr(b, e == std::string::npos ? std::string::npos : e - b);
      DaemonConfig c;
      Status st = apply_override(c, k.key, name);
      ASSERT_TRUE(st.ok()) << name << ": " << st.to_string();
      const std::string key(k.key), leaf = key.substr(key.find('.') + 1);
      EXPECT_NE(to_toml(c).find("\n" + leaf + " = \"" + name + "\"\n"), std::string::npos) << name;
      DaemonConfig again;
      ASSERT_TRUE(apply_toml(again, to_toml(c, true)).ok());
      EXPECT_EQ(to_toml(again, true), to_toml(c, true));
      if (e == std::string::npos) break;
      b = e + 3;
    }
  }
  DaemonConfig c;
  ASSERT_TRUE(apply_override(c, "runtime.kv_dtype", "int8").ok());
  EXPECT_EQ(c.runtime.model.kv_dtype, kernels::KvDtype::kInt8);
  ASSERT_TRUE(apply_override(c, "runtime.weights", "bf16").ok());
  EXPECT_EQ(c.runtime.model.weights, engine::WeightFormat::kBF16);
  ASSERT_TRUE(apply_override(c, "runtime.eviction", "gdsf").ok());
  EXPECT_EQ(c.runtime.kv.eviction, kvstore::EvictionPolicy::kGdsf);
  ASSERT_TRUE(apply_override(c, "runtime.sp_partition", "contiguous").ok());
  EXPECT_EQ(c.runtime.sp_partition, seqparallel::PartitionKind::kContiguous);
  // The printed comment lists the choices from the same table.
  EXPECT_NE(to_toml(c).find(": f32 | bf16 | int8\nkv_dtype = \"int8\"\n"), std::string::npos) << to_toml(c);
}

// daemon::validate runs the runtime's own check (RuntimeOptions::validate, what open_runtime runs):
// what --print-config accepts the runtime accepts, and a refusal reads the same in both places.
TEST(Config, ValidateIsTheRuntimesCheck) {
  struct Case {
    const char* key;
    const char* value;
    const char* message;
  };
  const Case cases[] = {
      {"runtime.sp_workers", "0", "runtime.sp_workers: must be > 0, got 0"},
      {"runtime.sp_threshold_tokens", "0", "runtime.sp_threshold_tokens: must be > 0, got 0"},
      {"runtime.sp_chunk_tokens", "-1", "runtime.sp_chunk_tokens: must be >= 0, got -1"},
      {"runtime.device", "gpu", "runtime: device must be \"cpu\", \"cuda\" or \"cuda:N\" (N a device index); got 'gpu'"},
      {"runtime.device", "cuda:x", "runtime: device must be \"cpu\", \"cuda\" or \"cuda:N\" (N a device index); got 'cuda:x'"},
      {"runtime.tenant_share_percent", "101", "runtime.tenant_share_percent must be in [1, 100], got 101"},
      {"runtime.max_batch_tokens", "0", "runtime.max_batch_tokens: must be > 0, got 0"},
      {"runtime.num_threads", "-2", "runtime.num_threads: must be >= 0, got -2"},
      {"runtime.speculative_max_decodes", "0", "runtime.speculative_max_decodes must be in [1, 256], got 0"},
      {"runtime.speculative_answer_ngrams", "-1", "runtime.speculative_answer_ngrams must be in [0, 16777216], got -1"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.key);
    DaemonConfig c;
    ASSERT_TRUE(apply_override(c, k.key, k.value).ok());
    Status st = validate(c);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message(), k.message);
    EXPECT_EQ(st.message(), c.runtime.validate().message());
  }
  DaemonConfig c;
  ASSERT_TRUE(apply_override(c, "runtime.sp_workers", "4").ok());
  ASSERT_TRUE(apply_override(c, "runtime.device", "cuda:1").ok());  // syntax fine; SP is CPU-only
  Status st = validate(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sequence parallelism runs on the CPU backend"), std::string::npos) << st.message();
  EXPECT_EQ(st.message(), c.runtime.validate().message());
  ASSERT_TRUE(apply_override(c, "runtime.sp_workers", "1").ok());
  EXPECT_TRUE(validate(c).ok());  // cuda:1 parses; whether the build has CUDA is the engine's check
  c.runtime.model.kv_dtype = static_cast<kernels::KvDtype>(1);  // f16's reserved code: no name parses to it
  st = validate(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("runtime.kv_dtype"), std::string::npos) << st.message();
}

// runtime.index_spec never had an effect (the corpus keeps the index it was built with): naming it
// is an error that says so and what to use, in a file and at --set; it is not printed.
TEST(Config, RemovedKeyIsAnErrorThatSaysWhatToUse) {
  DaemonConfig c;
  Status st = apply_toml(c, "[runtime]\nindex_spec = \"Flat\"\n", "old.toml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("old.toml: runtime.index_spec: removed"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("ragctl ingest --index"), std::string::npos) << st.message();
  st = apply_override(c, "runtime.index_spec", "IVF1024,Flat");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("runtime.index_spec: removed"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("ragctl ingest --index"), std::string::npos) << st.message();
  EXPECT_EQ(to_toml(DaemonConfig{}).find("index_spec"), std::string::npos);
  for (const auto& k : config_keys()) EXPECT_NE(k, "runtime.index_spec");
}

// Every enum table the configuration, pipeline specs and requests parse with: each name parses to
// its value and back, and an unknown name is refused listing exactly the canonical names.
template <typename E>
void expect_table_round_trips() {
  SCOPED_TRACE(std::string(enum_what<E>()));
  const std::vector<E> values = enum_values<E>();
  ASSERT_FALSE(values.empty());
  std::string listed;
  for (E v : values) {
    const std::string_view name = enum_name(v);
    ASSERT_NE(name, "?");
    auto back = parse_enum<E>(name);
    ASSERT_TRUE(back.ok()) << name;
    EXPECT_EQ(*back, v) << name;
    listed += (listed.empty() ? "" : " | ") + std::string(name);
  }
  EXPECT_EQ(enum_choices<E>(), listed);
  auto bad = parse_enum<E>("no-such-name");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), std::string(enum_what<E>()) + " must be one of " + listed + "; got 'no-such-name'");
}

TEST(EnumTables, EveryNameRoundTripsAndUnknownNamesListTheChoices) {
  expect_table_round_trips<kernels::KvDtype>();
  expect_table_round_trips<kernels::WeightType>();
  expect_table_round_trips<kernels::CpuLevel>();
  expect_table_round_trips<engine::WeightFormat>();
  expect_table_round_trips<engine::DeviceKind>();
  expect_table_round_trips<engine::ChatTemplate>();
  expect_table_round_trips<engine::DType>();
  expect_table_round_trips<engine::Architecture>();
  expect_table_round_trips<kvstore::EvictionPolicy>();
  expect_table_round_trips<kvstore::Tier>();
  expect_table_round_trips<seqparallel::PartitionKind>();
  expect_table_round_trips<seqparallel::SpTransport>();
  expect_table_round_trips<pipelines::SchedPolicy>();
  expect_table_round_trips<pipelines::PreemptMode>();
  expect_table_round_trips<pipelines::ReuseMode>();
  expect_table_round_trips<pipelines::RetrievalOverlap>();
  expect_table_round_trips<pipelines::EmbedderKind>();
  expect_table_round_trips<log::Level>();
  // The request table (run_params.h) lists these choices in its own rows and 400 messages.
  EXPECT_EQ(enum_choices<pipelines::ReuseMode>(), "none | prefix | knowledge_tree | cacheblend | epic | auto");
  EXPECT_EQ(enum_choices<pipelines::RetrievalOverlap>(), "none | piperag | speculative | both");
}

TEST(Config, BadAuthKeysTable) {
  DaemonConfig c;
  Status st = apply_toml(c, "[auth.keys]\n\"k\" = 5\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("auth.keys.k: expected a non-empty tenant string"), std::string::npos) << st.message();
}

// server.metrics_require_key (tenant-isolation issue, low 6): parsed from the file and flags; the
// whole config (keys may come from --api-key after the file) must have an API key for it.
// The remote tier's trust rule joins keys that may come from different sources (a file's url, a
// flag's secret_file): checked on the whole config, by validate (what --print-config runs).
TEST(Config, RemoteTierNeedsAFleetSecretOrExplicitTrust) {
  DaemonConfig c;
  ASSERT_TRUE(apply_toml(c, "[kvstore.remote]\nurl = \"redis://127.0.0.1:6379\"\nmac = \"hmac-sha256\"\n").ok());
  Status st = validate(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("kvstore.remote.secret_file"), std::string::npos) << st.message();
  ASSERT_TRUE(apply_override(c, "kvstore.remote.secret_file", "/etc/ragd/fleet.key").ok());
  EXPECT_TRUE(validate(c).ok());
  DaemonConfig t;
  ASSERT_TRUE(apply_override(t, "kvstore.remote.url", "redis://127.0.0.1:6379").ok());
  ASSERT_TRUE(apply_override(t, "kvstore.remote.trust_unauthenticated", "true").ok());
  EXPECT_TRUE(validate(t).ok());
  // Bad remote values are refused by validate too (they used to pass until the store opened).
  ASSERT_TRUE(apply_override(t, "kvstore.remote.timeout_ms", "0").ok());
  st = validate(t);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "kvstore.remote.timeout_ms must be in 1..60000, got 0");
  EXPECT_EQ(st.message(), t.runtime.validate().message());  // the runtime's one check, kv.remote included
  ASSERT_TRUE(apply_override(t, "kvstore.remote.timeout_ms", "250").ok());
  EXPECT_FALSE(apply_override(t, "kvstore.remote.mac", "md5").ok());
  EXPECT_FALSE(apply_override(t, "events.kv_socket", "listen").ok());
  ASSERT_TRUE(apply_override(t, "events.kv_socket", "bind").ok());
  const std::string printed = to_toml(t, false);
  EXPECT_NE(printed.find("kv_socket = \"bind\""), std::string::npos);
  EXPECT_NE(printed.find("mac = \"gmac-aes256\""), std::string::npos);
  // The retrieval mode, by name (auto by default).
  EXPECT_NE(printed.find("retrieval_mode = \"auto\""), std::string::npos);
  EXPECT_EQ(t.runtime.retrieval_mode, retrieval::RetrievalMode::kAuto);
  ASSERT_TRUE(apply_override(t, "runtime.retrieval_mode", "lexical").ok());
  EXPECT_EQ(t.runtime.retrieval_mode, retrieval::RetrievalMode::kLexical);
  const Status bad = apply_override(t, "runtime.retrieval_mode", "bm25");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("hybrid"), std::string::npos) << bad.message();
}

TEST(Config, MetricsRequireKeyNeedsApiKeys) {
  DaemonConfig c;
  EXPECT_FALSE(c.server.metrics_require_key);
  Status st = apply_toml(c, "[server]\nmetrics_require_key = true\n");
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(c.server.metrics_require_key);
  st = validate(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("server.metrics_require_key: needs API keys"), std::string::npos) << st.message();
  c.auth.keys["sk-1"] = "acme";
  EXPECT_TRUE(validate(c).ok());
  c.auth.keys.clear();
  c.auth.admin_keys["sk-root"] = "ops";
  EXPECT_TRUE(validate(c).ok());
  DaemonConfig d;
  ASSERT_TRUE(apply_override(d, "server.metrics_require_key", "true").ok());
  EXPECT_TRUE(d.server.metrics_require_key);
  st = apply_toml(d, "[server]\nmetrics_require_key = \"yes\"\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("server.metrics_require_key: expected boolean"), std::string::npos) << st.message();
}

// One key in both [auth.keys] and [auth.admin_keys] would silently be an admin key (security issue
// 48, item 3): refused from a file, from a file and a flag, from two flags, naming the key by its
// first 4 characters only and both tables; a flag giving a key of the table to another tenant too.
TEST(Config, KeyInBothTablesIsRefusedWithoutPrintingIt) {
  const std::string key = "sk-shared-0123456789";
  auto expect_refusal = [&](const Status& st, const std::string& what) {
    ASSERT_FALSE(st.ok()) << what;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what;
    EXPECT_NE(st.message().find("'sk-s...'"), std::string::npos) << what << ": " << st.message();
    EXPECT_EQ(st.message().find(key), std::string::npos) << what << ": the secret is printed: " << st.message();
  };
  auto expect_both_tables = [&](const Status& st, const std::string& what) {
    expect_refusal(st, what);
    EXPECT_NE(st.message().find("[auth.keys] (tenant 'acme')"), std::string::npos) << what << ": " << st.message();
    EXPECT_NE(st.message().find("[auth.admin_keys] (tenant 'ops')"), std::string::npos) << what << ": " << st.message();
  };
  const std::string file = "[auth.keys]\n\"" + key + "\" = \"acme\"\n";
  DaemonConfig in_file;
  expect_both_tables(apply_toml(in_file, file + "[auth.admin_keys]\n\"" + key + "\" = \"ops\"\n", "k.toml"), "one file");
  DaemonConfig file_and_flag;
  ASSERT_TRUE(apply_toml(file_and_flag, file).ok());
  ASSERT_TRUE(apply_key_flag(file_and_flag, true, key + "=ops").ok());
  expect_both_tables(validate(file_and_flag), "file and --admin-key");
  DaemonConfig flags;
  ASSERT_TRUE(apply_key_flag(flags, false, key + "=acme").ok());
  ASSERT_TRUE(apply_key_flag(flags, true, key + "=ops").ok());
  expect_both_tables(validate(flags), "--api-key and --admin-key");
  // The same key again for another tenant of the same table: refused; for the same tenant: as before.
  DaemonConfig again;
  ASSERT_TRUE(apply_toml(again, file).ok());
  Status st = apply_key_flag(again, false, key + "=globex");
  expect_refusal(st, "--api-key remapping a key of the file");
  EXPECT_NE(st.message().find("for tenant 'acme', not 'globex'"), std::string::npos) << st.message();
  EXPECT_EQ(again.auth.keys.at(key), "acme");
  EXPECT_TRUE(apply_key_flag(again, false, key + "=acme").ok());
  // Distinct keys in the two tables are what the tables are for.
  ASSERT_TRUE(apply_key_flag(again, true, "sk-root-0123456789=ops").ok());
  EXPECT_TRUE(validate(again).ok());
  EXPECT_FALSE(apply_key_flag(again, true, "=ops").ok());
  EXPECT_FALSE(apply_key_flag(again, true, "sk-root").ok());
}

TEST(JsonWriter, EscapesAndNests) {
  JsonWriter w;
  w.begin_object().key("s").value("a\"b\\c\n\x01").key("n").value(-7).key("u").value(uint64_t{18446744073709551615ull});
  w.key("d").value(0.5).key("inf").value(1.0 / 0.0).key("arr").begin_array().value(true).null().begin_object().end_object();
  w.end_array().end_object();
  EXPECT_EQ(w.str(), R"({"s":"a\"b\\c\n\u0001","n":-7,"u":18446744073709551615,"d":0.5,"inf":null,"arr":[true,null,{}]})");
  Json j(w.str());
  EXPECT_TRUE(j.ok);
}

TEST(JsonWriter, InvalidUtf8Replaced) {
  std::string out;
  json_escape(out, std::string("ok \xC3\xA9 bad \xFF \xE2\x82 end", 18));
  EXPECT_EQ(out, "\"ok \xC3\xA9 bad \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD end\"");
  EXPECT_TRUE(Json(out).ok);
  out.clear();
  json_escape(out, "\xED\xA0\x80");  // UTF-16 surrogate encoded in UTF-8: invalid
  EXPECT_EQ(out, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

TEST(Metrics, HistogramIsCumulativeWithSumAndCount) {
  MetricsRegistry reg;
  auto& h = reg.histogram("t_seconds", "help", {"route"}, {0.1, 0.5, 1.0});
  const double samples[] = {0.05, 0.1, 0.3, 0.7, 2.0, 0.2, 0.9};
  for (double s : samples) h.observe({"/a"}, s);
  std::string out = reg.render();
  EXPECT_NE(out.find("# TYPE t_seconds histogram"), std::string::npos);
  // Naive reference: count of samples <= bound.
  for (double b : {0.1, 0.5, 1.0}) {
    int n = 0;
    for (double s : samples) n += s <= b;
    char line[128];
    std::snprintf(line, sizeof line, "t_seconds_bucket{route=\"/a\",le=\"%.17g\"} %d\n", b, n);
    EXPECT_NE(out.find(line), std::string::npos) << line << out;
  }
  EXPECT_NE(out.find("t_seconds_bucket{route=\"/a\",le=\"+Inf\"} 7\n"), std::string::npos);
  EXPECT_NE(out.find("t_seconds_count{route=\"/a\"} 7\n"), std::string::npos);
  double sum = 0;
  for (double s : samples) sum += s;
  char line[128];
  std::snprintf(line, sizeof line, "t_seconds_sum{route=\"/a\"} %.17g\n", sum);
  EXPECT_NE(out.find(line), std::string::npos) << out;
}

TEST(Metrics, CountersGaugesAndLabelEscaping) {
  MetricsRegistry reg;
  auto& c = reg.counter("reqs_total", "requests", {"path"});
  c.inc({"/x\"y\\z\n"});
  c.inc({"/x\"y\\z\n"}, 2);
  auto& g = reg.gauge("temp", "a gauge");
  g.set({}, 3.5);
  g.inc({}, -1);
  std::string out = reg.render();
  EXPECT_NE(out.find("reqs_total{path=\"/x\\\"y\\\\z\\n\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE temp gauge\ntemp 2.5\n"), std::string::npos) << out;
  EXPECT_EQ(c.value({"/x\"y\\z\n"}), 3);
}

TEST(Metrics, RestrictedFamiliesOnlyInTheFullRender) {
  MetricsRegistry reg;
  reg.counter("open_total", "shown to everyone").inc({});
  reg.gauge("cache_bytes", "operators only").restrict().set({}, 7);
  const std::string full = reg.render(), open = reg.render(false);
  EXPECT_NE(full.find("cache_bytes 7\n"), std::string::npos) << full;
  EXPECT_NE(full.find("open_total 1\n"), std::string::npos) << full;
  EXPECT_EQ(open.find("cache_bytes"), std::string::npos) << open;
  EXPECT_NE(open.find("open_total 1\n"), std::string::npos) << open;
}

TEST(Client, ParseUrl) {
  auto u = parse_url("ws://127.0.0.1:8123/v1/stream?x=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "ws");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8123);
  EXPECT_EQ(u->target, "/v1/stream?x=1");
  u = parse_url("localhost:9");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->target, "/");
  EXPECT_FALSE(parse_url("https://x:1/").ok());
  EXPECT_FALSE(parse_url("http://x:99999/").ok());
}

TEST(Client, SseParserSplitsAcrossFeeds) {
  std::vector<std::pair<std::string, std::string>> ev;
  SseParser p([&](const std::string& e, const std::string& d) { ev.emplace_back(e, d); });
  std::string stream = ": comment\n\nevent: token\ndata: {\"a\":1}\n\ndata: line1\r\ndata: line2\r\n\r\ndata: [DONE]\n\n";
  for (size_t i = 0; i < stream.size(); i += 7) p.feed(std::string_view(stream).substr(i, 7));
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].first, "token");
  EXPECT_EQ(ev[0].second, "{\"a\":1}");
  EXPECT_EQ(ev[1].first, "");
  EXPECT_EQ(ev[1].second, "line1\nline2");
  EXPECT_EQ(ev[2].second, "[DONE]");
}

}  // namespace
}  // namespace ragd::testing

// SseBridge keeps the executor's order while the response attaches: frames sent during the flush
// of the pending ones cannot overtake them, and finish() never closes the stream before them.
// (Before, a frame could be written ahead of the pending ones, or after finish, about 3 % of
// fast streamed completions.)
namespace ragd::testing {
namespace {
class RecordingWriter : public daemon::StreamWriter {
 public:
  bool send(std::string msg) override {
    std::this_thread::sleep_for(std::chrono::microseconds(20));  // a real writer's queueing takes time
    std::lock_guard<std::mutex> l(mu);
    if (finished) late = true;
    got.push_back(std::move(msg));
    return true;
  }
  void finish() override {
    std::lock_guard<std::mutex> l(mu);
    finished = true;
  }
  void close(uint16_t, std::string) override {}
  bool is_open() const override { return true; }
  std::mutex mu;
  std::vector<std::string> got;
  bool finished = false, late = false;
};
}  // namespace

TEST(SseBridge, KeepsOrderAndFinishesLastWhileAttaching) {
  for (int trial = 0; trial < 200; ++trial) {
    auto bridge = std::make_shared<daemon::SseBridge>();
    auto w = std::make_shared<RecordingWriter>();
    std::thread producer([&] {
      for (int i = 0; i < 40; ++i) {
        bridge->send(std::to_string(i));
        std::this_thread::sleep_for(std::chrono::microseconds(5));  // tokens come over time
      }
      bridge->finish();
    });
    std::this_thread::sleep_for(std::chrono::microseconds(trial % 40 * 10));  // attach at varied points
    bridge->attach(w);
    producer.join();
    std::lock_guard<std::mutex> l(w->mu);
    ASSERT_EQ(w->got.size(), 40u) << "trial " << trial;
    for (int i = 0; i < 40; ++i) ASSERT_EQ(w->got[static_cast<size_t>(i)], std::to_string(i)) << "trial " << trial;
    EXPECT_TRUE(w->finished);
    EXPECT_FALSE(w->late) << "a frame after finish, trial " << trial;
  }
}
}  // namespace ragd::testing

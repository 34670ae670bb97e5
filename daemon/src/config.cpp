// Config table, TOML parsing (toml++: the only TU that includes it), overrides, printing.
#include "ragd/daemon/config.h"

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <type_traits>
#include <utility>

#include <toml++/toml.h>

#include "ragd/common/enum_names.h"
#include "ragd/common/utf8.h"

namespace ragd::daemon {
namespace {

enum class Type { kString, kInt, kSize, kBool, kEnum };
// kSize fields are written as size_t: the module Options' byte counts (size_t or uint64_t) must be
// that type.
static_assert(std::is_same_v<size_t, uint64_t>);

// An enum-valued field, through its enum's one name table (enum_names.h): parsed when the config
// is read, printed by name.
struct EnumCodec {
  std::string (*name)(const void* field);
  Status (*parse)(void* field, std::string_view name, std::string_view key);
  std::string (*choices)();
};

template <typename E>
const EnumCodec* enum_codec() {
  static const EnumCodec c{
      [](const void* f) { return std::string(enum_name(*static_cast<const E*>(f))); },
      [](void* f, std::string_view name, std::string_view key) -> Status {
        RAGD_ASSIGN_OR_RETURN(*static_cast<E*>(f), parse_enum<E>(name, key));
        return Status::OK();
      },
      [] { return enum_choices<E>(); }};
  return &c;
}

struct Field {
  const char* key;      // dotted
  Type type;
  const char* comment;  // printed above the key (enum fields: followed by their choices)
  std::function<void*(DaemonConfig&)> ptr;
  const EnumCodec* codec = nullptr;  // kEnum
};

#define RAGD_F(key, type, comment, expr) \
  Field { key, type, comment, [](DaemonConfig& c) -> void* { return &(c.expr); } }
#define RAGD_E(key, comment, expr)                                                          \
  Field {                                                                                   \
    key, Type::kEnum, comment, [](DaemonConfig& c) -> void* { return &(c.expr); },          \
        enum_codec<std::remove_reference_t<decltype(std::declval<DaemonConfig&>().expr)>>() \
  }

// Keys that were accepted once and are gone: naming one is an error that says why and what to
// use instead, never silently accepted.
struct RemovedKey {
  const char* key;
  const char* why;
};
constexpr RemovedKey kRemovedKeys[] = {
    {"runtime.index_spec",
     "removed: it never had an effect (the daemon opens the corpus with the vector index it was built with); "
     "choose the index when building the corpus, `ragctl ingest --index \"IVF1024,Flat\"`, and delete this key"},
};

Status removed_key_error(std::string_view key) {
  for (const RemovedKey& r : kRemovedKeys)
    if (key == r.key) return Status::InvalidArgument(std::string(key) + ": " + r.why);
  return Status::OK();
}

const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      RAGD_E("log_level", "log verbosity", log_level),
      // server
      RAGD_F("server.listen", Type::kString, "host:port to listen on; port 0 picks a free port", server.listen),
      RAGD_F("server.threads", Type::kInt, "io_context threads; 0 = hardware concurrency (min 2)", server.threads),
      RAGD_F("server.max_body_bytes", Type::kSize, "request body limit in bytes (413 above)", server.max_body_bytes),
      RAGD_F("server.max_header_bytes", Type::kSize, "request header limit in bytes (431 above)", server.max_header_bytes),
      RAGD_F("server.first_byte_timeout_ms", Type::kInt,
             "a new connection that sends nothing for this long is closed, ms", server.first_byte_timeout_ms),
      RAGD_F("server.read_timeout_ms", Type::kInt,
             "deadline to read one whole request once its first bytes came (408 after it), ms", server.read_timeout_ms),
      RAGD_F("server.write_timeout_ms", Type::kInt, "deadline for one write to the client, ms", server.write_timeout_ms),
      RAGD_F("server.idle_timeout_ms", Type::kInt, "keep-alive connection idle deadline, ms", server.idle_timeout_ms),
      RAGD_F("server.max_connections", Type::kInt,
             "open connections; above this new ones are served only /healthz and /readyz (others 503 "
             "too_many_connections) and closed after one response; lowered to the open-file limit less 96",
             server.max_connections),
      RAGD_F("server.max_connections_per_client", Type::kInt,
             "open connections from one client address, treated like max_connections; 0 = no per-client cap",
             server.max_connections_per_client),
      RAGD_F("server.stream_queue_limit", Type::kInt,
             "queued outgoing stream messages per client before it is disconnected and its run cancelled",
             server.stream_queue_limit),
      RAGD_F("server.ws_ping_interval_ms", Type::kInt, "WebSocket ping period, ms", server.ws_ping_interval_ms),
      RAGD_F("server.shutdown_deadline_ms", Type::kInt,
             "on SIGINT/SIGTERM in-flight requests get this long before they are cancelled, ms",
             server.shutdown_deadline_ms),
      RAGD_F("server.metrics_require_key", Type::kBool,
             "true: /metrics needs a valid API key (401 without); false: open, operational metrics only. "
             "Cache contents (KV tiers, reuse, executor stats) need an admin key either way",
             server.metrics_require_key),
      // runtime
      RAGD_F("runtime.model_dir", Type::kString, "Hugging Face model directory (config.json, *.safetensors, tokenizer.json)", runtime.model_dir),
      RAGD_F("runtime.data_dir", Type::kString, "document store, vector index and SSD KV tier live here", runtime.data_dir),
      RAGD_F("runtime.data_replica_of", Type::kString,
             "the primary's data_dir to serve read-only as a replica (data_dir keeps only the replica's scratch and "
             "SSD KV tier; document writes get 403); \"\" = off", runtime.data_replica_of),
      RAGD_F("runtime.replica_catch_up_ms", Type::kInt, "replica: how often it reads the primary's new documents, ms",
             runtime.replica_catch_up_ms),
      RAGD_F("runtime.pipelines_dir", Type::kString, "directory of *.toml pipeline specs; \"\" = only the built-in \"default\"", runtime.pipelines_dir),
      RAGD_F("runtime.device", Type::kString, "\"cpu\", \"cuda\" or \"cuda:N\"", runtime.model.device),
      RAGD_E("runtime.weights", "weights in memory (auto = the checkpoint's dtype; q8 = 8-bit blocks, quantized at load)", runtime.model.weights),
      RAGD_E("runtime.kv_dtype", "KV pool storage (bf16 = half the bytes; int8 = a quarter, plus a scale per token and head)", runtime.model.kv_dtype),
      RAGD_E("runtime.scheduler", "scheduling policy", runtime.scheduler.policy),
      RAGD_F("runtime.length_model", Type::kString,
             "srtf: output-length head trained by `ragctl length-train`; \"\" = sjf's estimate less the generated tokens",
             runtime.length_model),
      RAGD_F("runtime.length_log", Type::kString,
             "append one JSON line per finished run (features + output length; holds the questions) for "
             "`ragctl length-train`; \"\" = off", runtime.length_log),
      RAGD_F("runtime.max_batch_tokens", Type::kInt, "token budget per scheduler step (chunked prefill)", runtime.scheduler.max_batch_tokens),
      RAGD_F("runtime.max_running", Type::kInt, "concurrent sequences in the running batch", runtime.scheduler.max_running),
      RAGD_F("runtime.starvation_window", Type::kInt,
             "steps a waiting request may be passed over before it goes first (fcfs, sjf, mlfq, fair)",
             runtime.scheduler.starvation_window),
      RAGD_F("runtime.srtf_starvation_window", Type::kInt,
             "srtf: steps a request may spend waiting or swapped out before it ages and goes first",
             runtime.scheduler.srtf_starvation_window),
      RAGD_F("runtime.max_queue", Type::kInt, "waiting requests before new ones get 429", runtime.max_queue),
      RAGD_F("runtime.speculative_k", Type::kInt,
             "speculative decoding: n-gram draft tokens per decode step at most (0 = off); a request's speculative_k overrides it",
             runtime.speculative.k),
      RAGD_F("runtime.speculative_max_decodes", Type::kInt,
             "speculative decoding: no drafts while more than this many runs decode at once (a cap on top of the "
             "measured step-cost budget; 256 = no cap)", runtime.speculative.max_decodes),
      RAGD_F("runtime.speculative_answer_ngrams", Type::kInt,
             "speculative decoding: n-grams of earlier answers (per tenant and cache salt) kept to draft from where the "
             "prompt has nothing to copy; 0 = off", runtime.speculative.answer_ngrams),
      RAGD_E("runtime.speculative_method",
             "speculative decoding: where drafts come from (ngram = the run's own tokens; draft = a draft model, "
             "runtime.speculative_draft_model); a pipeline's or request's method overrides it", runtime.speculative.method),
      RAGD_F("runtime.speculative_draft_model", Type::kString,
             "speculative decoding: the draft model of method draft (a model directory with the serving model's "
             "tokenizer), loaded at start with its own KV pool; \"\" = none", runtime.speculative.draft_model),
      RAGD_F("runtime.kv_pool_bytes", Type::kSize, "in-engine (HBM-role) KV pool, bytes", runtime.model.kv_pool_bytes),
      RAGD_F("runtime.dram_cache_bytes", Type::kSize, "DRAM KV tier, bytes", runtime.kv.dram_bytes),
      RAGD_F("runtime.ssd_cache_bytes", Type::kSize, "SSD KV tier (RocksDB in data_dir), bytes", runtime.kv.ssd_bytes),
      RAGD_E("runtime.eviction", "KV eviction policy over every tier", runtime.kv.eviction),
      RAGD_E("runtime.preemption", "what a preempted request's KV does", runtime.scheduler.preemption),
      RAGD_F("runtime.tenant_share_percent", Type::kInt,
             "running slots one tenant may hold while others have requests, % of max_running (fair: an equal share)",
             runtime.scheduler.tenant_share_percent),
      RAGD_F("runtime.retrieval_threads", Type::kInt, "retrieval thread pool size", runtime.retrieval_threads),
      RAGD_F("runtime.retrieval_threads_per_tenant", Type::kInt,
             "retrieval threads one tenant's searches and reranking may hold at once; 0 = half of retrieval_threads",
             runtime.retrieval_threads_per_tenant),
      RAGD_F("runtime.hbm_cache", Type::kBool, "keep reusable KV in the engine pool (false: reuse only from the DRAM / SSD tiers)", runtime.hbm_cache),
      RAGD_F("runtime.num_threads", Type::kInt, "engine compute threads; 0 = all cores", runtime.model.num_threads),
      RAGD_F("runtime.sp_workers", Type::kInt, "sequence-parallel workers for long prompts (in-process); 1 = off", runtime.sp_workers),
      RAGD_F("runtime.sp_threshold_tokens", Type::kInt, "prompts of at least this many tokens go sequence-parallel", runtime.sp_threshold_tokens),
      RAGD_F("runtime.sp_chunk_tokens", Type::kInt, "ring prefill steps of about this many tokens per worker; 0 = one step", runtime.sp_chunk_tokens),
      RAGD_F("runtime.sp_rates_file", Type::kString, "kernel rates (ragctl plan --json) for the elastic degree; \"\" = every long run uses every worker", runtime.sp_rates_file),
      RAGD_F("runtime.kv_spill_dram_bytes", Type::kSize, "host memory for a long prompt's KV that leaves the pool, bytes (0 = none)", runtime.kv_spill_dram_bytes),
      RAGD_F("runtime.kv_spill_ssd", Type::kBool, "past kv_spill_dram_bytes, a long prompt's KV goes to a file in data_dir/kv-spill", runtime.kv_spill_ssd),
      RAGD_F("runtime.kv_spill_chunk_tokens", Type::kInt, "prefill step (tokens per worker) of a prompt that spills, when sp_chunk_tokens is 0", runtime.kv_spill_chunk_tokens),
      RAGD_E("runtime.sp_partition", "how a long prompt's positions are split across the workers", runtime.sp_partition),
      RAGD_E("runtime.sp_transport", "how the workers exchange KV", runtime.sp_transport),
      RAGD_E("runtime.embedder", "corpus embedder", runtime.embedder),
      RAGD_F("runtime.embedder_model_dir", Type::kString,
             "checkpoint of the \"model\" embedder (a BERT-family directory is an encoder embedder; \"\" = model_dir), or the \"termvec\" directory (\"\" = models/ragd-termvec)",
             runtime.embedder_model_dir),
      RAGD_F("runtime.embedder_query_prefix", Type::kString, "encoder embedders: instruction prepended to search queries",
             runtime.embedder_query_prefix),
      RAGD_F("runtime.embedder_document_prefix", Type::kString,
             "encoder embedders: instruction prepended to ingested passages", runtime.embedder_document_prefix),
      RAGD_F("runtime.rerank_model_dir", Type::kString,
             "cross-encoder checkpoint (BertForSequenceClassification) serving /v1/rerank; \"\" = none",
             runtime.rerank_model_dir),
      RAGD_F("runtime.chunk_tokens", Type::kInt, "tokens per document chunk at ingest", runtime.chunk_tokens),
      RAGD_E("runtime.retrieval_mode",
             "how searches find passages (default auto: lexical with the hashing embedder, hybrid with a semantic one, "
             "the better ranking on real documents); hybrid | lexical | dense (docs/design/retrieval.md)",
             runtime.retrieval_mode),
      // events: KV-cache events in vLLM's KV-event format (docs/design/kv-events.md)
      // kvstore.remote: the shared KV tier below SSD
      RAGD_F("kvstore.remote.url", Type::kString,
             "shared remote KV tier: redis://host:port, or a comma-separated list of Redis Cluster seed nodes; \"\" = off",
             runtime.kv.remote.url),
      RAGD_F("kvstore.remote.timeout_ms", Type::kInt, "bound on every Redis connect and reply; a failure opens the circuit breaker (recompute) until a probe succeeds", runtime.kv.remote.timeout_ms),
      RAGD_F("kvstore.remote.max_value_bytes", Type::kSize, "largest Redis value: a segment is stored in pieces of at most this many bytes", runtime.kv.remote.max_value_bytes),
      RAGD_F("kvstore.remote.ttl_s", Type::kInt, "expiry of every value in seconds; 0 = none (Redis's maxmemory policy evicts)", runtime.kv.remote.ttl_s),
      RAGD_F("kvstore.remote.write_queue_bytes", Type::kSize, "segments queued for writing behind; beyond it writes are dropped (counted)", runtime.kv.remote.write_queue_bytes),
      RAGD_F("kvstore.remote.secret_file", Type::kString,
             "file holding the fleet secret (>= 16 bytes, the same on every replica): every value is sealed with a MAC "
             "under it and checked before use; required unless trust_unauthenticated", runtime.kv.remote.secret_file),
      RAGD_E("kvstore.remote.mac", "MAC over every Redis value", runtime.kv.remote.mac),
      RAGD_F("kvstore.remote.trust_unauthenticated", Type::kBool,
             "use values from Redis without a MAC: only for a Redis no one else can write to (anyone who can may put KV "
             "into any tenant's prompt)", runtime.kv.remote.trust_unauthenticated),
      RAGD_F("kvstore.remote.password_file", Type::kString, "file holding the Redis password (AUTH on every connection); \"\" = no AUTH",
             runtime.kv.remote.password_file),
      RAGD_F("kvstore.remote.username", Type::kString, "Redis ACL user for AUTH; \"\" = the default user", runtime.kv.remote.username),
      RAGD_F("events.kv_endpoint", Type::kString,
             "ZeroMQ PUB endpoint for KV events (vLLM format), e.g. tcp://127.0.0.1:5557 with kv_socket = \"bind\"; \"\" = off. "
             "The stream carries the token ids of every tenant's documents unless kv_token_ids = false: keep it on "
             "loopback / IPC or use CURVE (docs/design/kv-events.md)", runtime.kv.events.endpoint),
      RAGD_E("events.kv_socket",
             "auto: bind when the endpoint has * or :: or is ipc:// / inproc://, connect otherwise (vLLM's rule); "
             "bind / connect: always", runtime.kv.events.mode),
      RAGD_F("events.kv_token_ids", Type::kBool,
             "BlockStored carries the blocks' token ids (vLLM's format); false: an empty list (block hashes only, no document text)",
             runtime.kv.events.token_ids),
      RAGD_F("events.kv_curve_secret_key_file", Type::kString,
             "ZeroMQ CURVE: file with the publisher's Z85 secret key (`ragctl curve-keypair`); the PUB and replay "
             "sockets then authenticate and encrypt; \"\" = plaintext", runtime.kv.events.curve_secret_key_file),
      RAGD_F("events.kv_curve_allowed_clients_file", Type::kString,
             "ZeroMQ CURVE: file with the Z85 public keys of the subscribers allowed (one per line); required with CURVE",
             runtime.kv.events.curve_allowed_clients_file),
      RAGD_F("events.kv_replay_endpoint", Type::kString,
             "ZeroMQ ROUTER endpoint (bound) where subscribers ask for missed KV-event batches; \"\" = no replay",
             runtime.kv.events.replay_endpoint),
      RAGD_F("events.kv_topic", Type::kString, "topic frame of every KV-event message; default \"\"", runtime.kv.events.topic),
      // limits
      RAGD_F("limits.max_concurrent_per_tenant", Type::kInt, "concurrent runs per tenant; more get 429 + Retry-After", limits.max_concurrent_per_tenant),
      RAGD_F("limits.retry_after_s", Type::kInt, "Retry-After value sent with 429, seconds", limits.retry_after_s),
  };
  return f;
}
#undef RAGD_F
#undef RAGD_E

const Field* find_field(std::string_view key) {
  for (const auto& f : fields())
    if (key == f.key) return &f;
  return nullptr;
}

const char* type_name(Type t) {
  switch (t) {
    case Type::kString: return "string";
    case Type::kInt: return "integer";
    case Type::kSize: return "non-negative integer";
    case Type::kBool: return "boolean";
    case Type::kEnum: return "string";
  }
  return "?";
}

std::string toml_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

Status set_int(const Field& f, DaemonConfig& cfg, int64_t v) {
  if (f.type == Type::kInt) {
    if (v < INT32_MIN || v > INT32_MAX) return Status::InvalidArgument(std::string(f.key) + ": value out of range");
    *static_cast<int*>(f.ptr(cfg)) = static_cast<int>(v);
  } else if (f.type == Type::kSize) {
    if (v < 0) return Status::InvalidArgument(std::string(f.key) + ": must be >= 0, got " + std::to_string(v));
    *static_cast<size_t*>(f.ptr(cfg)) = static_cast<size_t>(v);
  } else {
    return Status::InvalidArgument(std::string(f.key) + ": expected " + type_name(f.type) + ", got integer");
  }
  return Status::OK();
}

const char* node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    default: return "date/time";
  }
}

Status apply_node(DaemonConfig& cfg, const std::string& key, const toml::node& n) {
  // Map-valued sections first.
  if (key == "auth.keys" || key == "auth.admin_keys") {
    auto& keys = key == "auth.keys" ? cfg.auth.keys : cfg.auth.admin_keys;
    const toml::table* t = n.as_table();
    if (!t) return Status::InvalidArgument(key + ": expected a table of \"api-key\" = \"tenant\"");
    for (const auto& [k, v] : *t) {
      auto tenant = v.value<std::string>();
      if (!tenant || tenant->empty())
        return Status::InvalidArgument(key + "." + std::string(k.str()) + ": expected a non-empty tenant string");
      if (k.str().empty()) return Status::InvalidArgument(key + ": empty API key");
      keys[std::string(k.str())] = *tenant;
    }
    return Status::OK();
  }
  if (key == "limits.tenants") {
    const toml::table* t = n.as_table();
    if (!t) return Status::InvalidArgument("limits.tenants: expected a table of tenant tables");
    for (const auto& [tenant, v] : *t) {
      const toml::table* tt = v.as_table();
      std::string base = "limits.tenants." + std::string(tenant.str());
      if (!tt) return Status::InvalidArgument(base + ": expected a table");
      for (const auto& [k2, v2] : *tt) {
        if (k2.str() != "max_concurrent")
          return Status::InvalidArgument(base + "." + std::string(k2.str()) + ": unknown key");
        auto iv = v2.value<int64_t>();
        if (!v2.is_integer() || !iv || *iv < 0 || *iv > INT32_MAX)
          return Status::InvalidArgument(base + ".max_concurrent: expected a non-negative integer");
        cfg.limits.tenants[std::string(tenant.str())].max_concurrent = static_cast<int>(*iv);
      }
    }
    return Status::OK();
  }
  if (const toml::table* t = n.as_table()) {
    for (const auto& [k, v] : *t) {
      std::string sub = key.empty() ? std::string(k.str()) : key + "." + std::string(k.str());
      RAGD_RETURN_IF_ERROR(apply_node(cfg, sub, v));
    }
    return Status::OK();
  }
  RAGD_RETURN_IF_ERROR(removed_key_error(key));
  const Field* f = find_field(key);
  if (!f) return Status::InvalidArgument(key + ": unknown key");
  switch (f->type) {
    case Type::kString:
      if (!n.is_string()) return Status::InvalidArgument(key + ": expected string, got " + node_type_name(n));
      *static_cast<std::string*>(f->ptr(cfg)) = *n.value<std::string>();
      return Status::OK();
    case Type::kEnum:
      if (!n.is_string())
        return Status::InvalidArgument(key + ": expected a string (" + f->codec->choices() + "), got " + node_type_name(n));
      return f->codec->parse(f->ptr(cfg), *n.value<std::string>(), key);
    case Type::kInt:
    case Type::kSize:
      if (!n.is_integer()) return Status::InvalidArgument(key + ": expected " + type_name(f->type) + ", got " + node_type_name(n));
      return set_int(*f, cfg, *n.value<int64_t>());
    case Type::kBool:
      if (!n.is_boolean()) return Status::InvalidArgument(key + ": expected boolean, got " + node_type_name(n));
      *static_cast<bool*>(f->ptr(cfg)) = *n.value<bool>();
      return Status::OK();
  }
  return Status::Internal("unreachable");
}

}  // namespace

// An API key as messages and --print-config show it: its first 4 characters, never the secret.
static std::string key_hint(const std::string& k) {
  return k.size() > 4 ? k.substr(0, utf8_floor(k, 4)) + "..." : std::string("...");
}

static Status validate_options(const DaemonConfig& c, bool whole_config);

Status apply_toml(DaemonConfig& cfg, const std::string& toml_text, const std::string& source_name) {
  toml::table tbl;
  try {
    tbl = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return Status::InvalidArgument(os.str());
  }
  Status st = apply_node(cfg, "", tbl);
  if (!st.ok()) return st.with_context(source_name);
  return validate_options(cfg, /*whole_config=*/false).with_context(source_name);
}

Status load_config_file(DaemonConfig& cfg, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  return apply_toml(cfg, ss.str(), path);
}

Status apply_override(DaemonConfig& cfg, const std::string& key, const std::string& value) {
  RAGD_RETURN_IF_ERROR(removed_key_error(key));
  const Field* f = find_field(key);
  if (!f) return Status::InvalidArgument(key + ": unknown config key");
  switch (f->type) {
    case Type::kString:
      *static_cast<std::string*>(f->ptr(cfg)) = value;
      return Status::OK();
    case Type::kEnum:
      return f->codec->parse(f->ptr(cfg), value, key);
    case Type::kInt:
    case Type::kSize: {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size() || value.empty())
        return Status::InvalidArgument(key + ": expected " + type_name(f->type) + ", got '" + value + "'");
      return set_int(*f, cfg, v);
    }
    case Type::kBool:
      if (value == "true" || value == "1") *static_cast<bool*>(f->ptr(cfg)) = true;
      else if (value == "false" || value == "0") *static_cast<bool*>(f->ptr(cfg)) = false;
      else return Status::InvalidArgument(key + ": expected true or false, got '" + value + "'");
      return Status::OK();
  }
  return Status::Internal("unreachable");
}

Status parse_listen(const std::string& listen, std::string* host, uint16_t* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Status::InvalidArgument("server.listen: expected host:port, got '" + listen + "'");
  std::string h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  std::string p = listen.substr(colon + 1);
  int v = -1;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (p.empty() || ec != std::errc() || end != p.data() + p.size() || v < 0 || v > 65535)
    return Status::InvalidArgument("server.listen: port must be 0..65535, got '" + p + "'");
  if (host) *host = h;
  if (port) *port = static_cast<uint16_t>(v);
  return Status::OK();
}

// Every check that one config source can answer alone (apply_toml runs it on each file), and with
// whole_config the checks that join keys from different sources too.
static Status validate_options(const DaemonConfig& c, bool whole_config) {
  RAGD_RETURN_IF_ERROR(parse_listen(c.server.listen, nullptr, nullptr));
  auto positive = [](const char* key, int64_t v) -> Status {
    if (v <= 0) return Status::InvalidArgument(std::string(key) + ": must be > 0, got " + std::to_string(v));
    return Status::OK();
  };
  if (c.server.threads < 0) return Status::InvalidArgument("server.threads: must be >= 0");
  RAGD_RETURN_IF_ERROR(positive("server.max_body_bytes", static_cast<int64_t>(c.server.max_body_bytes)));
  RAGD_RETURN_IF_ERROR(positive("server.max_header_bytes", static_cast<int64_t>(c.server.max_header_bytes)));
  RAGD_RETURN_IF_ERROR(positive("server.first_byte_timeout_ms", c.server.first_byte_timeout_ms));
  RAGD_RETURN_IF_ERROR(positive("server.read_timeout_ms", c.server.read_timeout_ms));
  RAGD_RETURN_IF_ERROR(positive("server.write_timeout_ms", c.server.write_timeout_ms));
  RAGD_RETURN_IF_ERROR(positive("server.idle_timeout_ms", c.server.idle_timeout_ms));
  RAGD_RETURN_IF_ERROR(positive("server.max_connections", c.server.max_connections));
  if (c.server.max_connections_per_client < 0)
    return Status::InvalidArgument("server.max_connections_per_client: must be >= 0 (0 = no per-client cap)");
  RAGD_RETURN_IF_ERROR(positive("server.stream_queue_limit", c.server.stream_queue_limit));
  RAGD_RETURN_IF_ERROR(positive("server.ws_ping_interval_ms", c.server.ws_ping_interval_ms));
  if (c.server.shutdown_deadline_ms < 0) return Status::InvalidArgument("server.shutdown_deadline_ms: must be >= 0");
  // The runtime's own check, the one open_runtime runs: same keys, same messages. The remote
  // tier's trust rule joins keys that may come from different sources (a file's url, a flag's
  // secret_file), so one source is checked without the remote tier and the whole config with it.
  if (whole_config) {
    RAGD_RETURN_IF_ERROR(c.runtime.validate());
  } else {
    pipelines::RuntimeOptions one_source = c.runtime;
    one_source.kv.remote = {};
    RAGD_RETURN_IF_ERROR(one_source.validate());
  }
  RAGD_RETURN_IF_ERROR(positive("limits.max_concurrent_per_tenant", c.limits.max_concurrent_per_tenant));
  if (c.limits.retry_after_s < 0) return Status::InvalidArgument("limits.retry_after_s: must be >= 0");
  if (!enum_known(c.log_level)) return Status::InvalidArgument("log_level: value out of range");
  // A key in both tables would silently become an admin key: refused, whichever sources gave it.
  for (const auto& [key, admin_tenant] : c.auth.admin_keys)
    if (auto it = c.auth.keys.find(key); it != c.auth.keys.end())
      return Status::InvalidArgument("auth: API key '" + key_hint(key) + "' is in both [auth.keys] (tenant '" + it->second +
                                     "') and [auth.admin_keys] (tenant '" + admin_tenant +
                                     "'); a key has one role: remove it from one of them (--api-key / --admin-key included)");
  return Status::OK();
}

Status apply_key_flag(DaemonConfig& cfg, bool admin, const std::string& key_eq_tenant) {
  const std::string flag = admin ? "--admin-key" : "--api-key";
  const auto eq = key_eq_tenant.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == key_eq_tenant.size())
    return Status::InvalidArgument(flag + ": expected KEY=TENANT");
  const std::string key = key_eq_tenant.substr(0, eq), tenant = key_eq_tenant.substr(eq + 1);
  auto& keys = admin ? cfg.auth.admin_keys : cfg.auth.keys;
  // The same key for another tenant (from the file or an earlier flag) would move a tenant's key
  // to another tenant without a word.
  if (auto it = keys.find(key); it != keys.end() && it->second != tenant)
    return Status::InvalidArgument(flag + ": API key '" + key_hint(key) + "' is already in [" +
                                   (admin ? "auth.admin_keys" : "auth.keys") + "] for tenant '" + it->second +
                                   "', not '" + tenant + "'");
  keys[key] = tenant;
  return Status::OK();
}

Status validate(const DaemonConfig& c) {
  // The runtime's check includes the remote tier's options here, so --print-config refuses what
  // open would.
  RAGD_RETURN_IF_ERROR(validate_options(c, /*whole_config=*/true));
  // API keys may come from flags after the file: checked on the whole config only.
  if (c.server.metrics_require_key && c.auth.keys.empty() && c.auth.admin_keys.empty())
    return Status::InvalidArgument(
        "server.metrics_require_key: needs API keys ([auth.keys] or [auth.admin_keys], --api-key, --admin-key); "
        "without keys auth is off and no key could be presented");
  return Status::OK();
}

std::string to_toml(const DaemonConfig& cfg_in, bool show_secrets) {
  DaemonConfig cfg = cfg_in;  // fields() hands out mutable pointers
  std::ostringstream os;
  os << "# ragd effective configuration\n";
  std::string section;
  for (const auto& f : fields()) {
    std::string key = f.key;
    auto dot = key.rfind('.');  // kvstore.remote.url: [kvstore.remote] url
    std::string sec = dot == std::string::npos ? "" : key.substr(0, dot);
    std::string leaf = dot == std::string::npos ? key : key.substr(dot + 1);
    if (sec != section) {
      os << "\n[" << sec << "]\n";
      section = sec;
    }
    os << "# " << f.comment;
    if (f.type == Type::kEnum) os << ": " << f.codec->choices();
    os << "\n" << leaf << " = ";
    void* p = f.ptr(cfg);
    switch (f.type) {
      case Type::kString: os << toml_quote(*static_cast<std::string*>(p)); break;
      case Type::kEnum: os << toml_quote(f.codec->name(p)); break;
      case Type::kInt: os << *static_cast<int*>(p); break;
      case Type::kSize: os << *static_cast<size_t*>(p); break;
      case Type::kBool: os << (*static_cast<bool*>(p) ? "true" : "false"); break;
    }
    os << "\n";
  }
  os << "\n# Per-tenant overrides: [limits.tenants.NAME] max_concurrent = N\n";
  for (const auto& [t, l] : cfg.limits.tenants)
    os << "[limits.tenants." << toml_quote(t) << "]\nmax_concurrent = " << l.max_concurrent << "\n";
  auto print_keys = [&](const char* table, const std::map<std::string, std::string>& keys) {
    os << "[" << table << "]\n";
    for (const auto& [k, t] : keys) {
      std::string shown = show_secrets ? k : key_hint(k);
      os << toml_quote(shown) << " = " << toml_quote(t) << "\n";
    }
  };
  os << "\n# API keys: \"key\" = \"tenant\". Empty (with no admin keys) = auth disabled.\n";
  print_keys("auth.keys", cfg.auth.keys);
  os << "\n# Admin API keys: \"key\" = \"tenant\"; they also write shared documents and see full cache stats.\n";
  print_keys("auth.admin_keys", cfg.auth.admin_keys);
  return os.str();
}

std::vector<std::string> config_keys() {
  std::vector<std::string> out;
  for (const auto& f : fields()) out.push_back(f.key);
  return out;
}

}  // namespace ragd::daemon

#include "ragd/kvstore/keys.h"

#include "ragd/kvstore/segment.h"

namespace ragd::kvstore {

// The bytes hashed here are a stored format (keys.h): do not change them, version the tag.

Hash128 doc_key(std::span<const int32_t> tokens) {
  Hasher128 h;
  h.str("ragd.kv.doc.v1").i32s(tokens);
  return h.digest();
}

namespace {

Hash128 scope_key(std::string_view kind, const KvFormat& f, std::string_view scope) {
  Hasher128 h;
  h.str(kind).h128(f.model_fingerprint).u64(static_cast<uint64_t>(f.dtype)).u64(f.layout_version);
  h.u64(static_cast<uint64_t>(f.num_layers)).u64(static_cast<uint64_t>(f.num_kv_heads)).u64(static_cast<uint64_t>(f.head_dim));
  h.u64(f.k_rotated ? 1 : 0).str(scope);
  return h.digest();
}

}  // namespace

Hash128 tree_scope_key(const KvFormat& f, std::string_view scope) { return scope_key("ragd.kv.tree.v1", f, scope); }
Hash128 chunk_scope_key(const KvFormat& f, std::string_view scope) { return scope_key("ragd.kv.chunk.v1", f, scope); }

Hash128 child_key(const Hash128& parent_key, const Hash128& doc) {
  Hasher128 h;
  h.str("ragd.kv.node.v1").h128(parent_key).h128(doc);
  return h.digest();
}

std::string kv_scope(std::string_view tenant, std::string_view cache_salt) {
  if (cache_salt.empty()) return std::string(tenant);
  // Length-prefixed: ("a", "bc") and ("ab", "c") differ; never equal to a bare tenant name.
  return std::to_string(tenant.size()) + ":" + std::string(tenant) + "\x1fsalt:" + std::string(cache_salt);
}

Hash128 scoped_doc_key(const Hash128& doc, std::string_view scope) {
  if (scope.empty()) return doc;
  Hasher128 h;
  h.str("ragd.kv.scoped_doc.v1").str(scope).h128(doc);
  return h.digest();
}

Hash128 chunk_key(const Hash128& head, const Hash128& doc) {
  Hasher128 h;
  h.str("ragd.chunk.v1").h128(head).h128(doc);
  return h.digest();
}

uint64_t event_block_hash(std::optional<uint64_t> prev, std::span<const int32_t> block_tokens, const Hash128& scope_root) {
  Hasher128 h;
  h.str("ragd.kv.event_block.v1").u64(prev ? 1 : 0).u64(prev.value_or(0)).i32s(block_tokens).h128(scope_root);
  return h.digest().lo;
}

}  // namespace ragd::kvstore

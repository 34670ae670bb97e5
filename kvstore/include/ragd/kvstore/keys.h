// Every KV key ragd builds, in one place (DESIGN.md: "Keys are built in one place: kvstore").
//
// Keys are xxh3-128 content hashes, deterministic, never process-seeded: they name the same KV in
// every tier, across restarts and between replicas, so the bytes hashed here are a stored format.
// Changing what a function feeds the hasher (its tag string, field order, widths) invalidates every
// cache on disk and in Redis; bump the tag's version instead and say so. The values are pinned by
// tests/kvstore/keys_test.cpp.
//
//   doc key      the token ids of one document / chunk (tag "ragd.kv.doc.v1")
//   scope keys   roots: model fingerprint, KV dtype, layout version, shape, RoPE convention and the
//                request's KV scope (kv_scope(): tenant and cache_salt; "" when tenant isolation is
//                off) — one for the knowledge tree
//                ("ragd.kv.tree.v1"), one for the flat chunk cache ("ragd.kv.chunk.v1")
//   child key    a document under its parent: tree node = child_key(parent node or tree scope, doc);
//                chunk-cache entry = child_key(chunk scope, chunk_key(head, doc)) ("ragd.kv.node.v1")
//   chunk key    a document's position-independent KV as computed after a prompt head (kv_blend in
//                pipelines): the head's doc key and the document's ("ragd.chunk.v1")
//   event block  one KV block (block_size tokens at absolute path positions) as announced in KV events
//                (kv_events.h): the previous block's hash (none for a path's first block), the block's
//                token ids and the scope root ("ragd.kv.event_block.v1"); the low 64 bits are the hash
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ragd/common/hash.h"

namespace ragd::kvstore {

struct KvFormat;  // segment.h

// The token ids of one document / chunk.
Hash128 doc_key(std::span<const int32_t> tokens);
// Root of a knowledge tree: model fingerprint + dtype + layout version + shape + RoPE convention
// (+ the KV scope, kv_scope(), when tenant isolation is on; pass "" otherwise).
Hash128 tree_scope_key(const KvFormat& fmt, std::string_view scope);
// Root of the flat position-independent chunk cache for the same scope.
Hash128 chunk_scope_key(const KvFormat& fmt, std::string_view scope);
// Key of a document under its parent (parent key = parent node key, or the scope key at depth 0).
Hash128 child_key(const Hash128& parent_key, const Hash128& doc);
// Chunk-cache document key of `doc` computed right after the prompt head `head` (both doc_key()s),
// so every prompt with the same head shares the entry. The store adds the scope (child_key under
// chunk_scope_key(), the KV scope included).
Hash128 chunk_key(const Hash128& head, const Hash128& doc);
// A request's KV scope: the tenant ("" when tenant isolation is off or the request is anonymous)
// and its cache_salt (OpenAI's / vLLM's request field; "" = none). Requests share reusable KV only
// when their scopes are equal. The result is what the store's `scope` arguments take.
std::string kv_scope(std::string_view tenant, std::string_view cache_salt);
// A document's key inside a scope, for paths whose head is shared across scopes (the pipeline's own
// system prompt, which is server configuration): the tree root and the head are unscoped, every
// document below them carries the scope in its own key ("ragd.kv.scoped_doc.v1"). "" = `doc`.
Hash128 scoped_doc_key(const Hash128& doc, std::string_view scope);
// Hash of one block in KV events (vLLM's BlockStored / BlockRemoved block_hashes): chained from the
// previous block of the same path (nullopt for the first block of a path or of a chunk entry), in the
// scope `scope_root` (tree_scope_key() or chunk_scope_key()).
uint64_t event_block_hash(std::optional<uint64_t> prev, std::span<const int32_t> block_tokens, const Hash128& scope_root);

}  // namespace ragd::kvstore

// KV keys (keys.h) are a stored format: caches on SSD and in Redis are found by them after a
// restart or an upgrade. These golden values were computed before the chunk key moved from
// pipelines (kv_blend.cpp, pipelines::chunk_key at 4f0b83c) into kvstore; they must never change.
#include "ragd/kvstore/keys.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv_test_util.h"
#include "ragd/kvstore/kv_store.h"

namespace ragd::kvstore {
namespace {

using testing::make_kv;
using testing::test_format;

const std::vector<int32_t> kHead = {1, 2, 3, 4, 5, 6, 7};
const std::vector<int32_t> kDoc = {11, 12, 13};

// pipelines::chunk_key as it was at 4f0b83c, verbatim: the reference the moved function must equal.
Hash128 chunk_key_before_the_move(const Hash128& head, const Hash128& doc) {
  Hasher128 h;
  h.str("ragd.chunk.v1").h128(head).h128(doc);
  return h.digest();
}

TEST(Keys, ChunkKeyIsPinned) {
  const Hash128 head = doc_key(kHead), doc = doc_key(kDoc);
  EXPECT_EQ(head.to_hex(), "6e5448edd40781cf996e0d452960dce4");
  EXPECT_EQ(doc.to_hex(), "bbf675671bcf5bae23c10801055dfe19");
  EXPECT_EQ(chunk_key(head, doc).to_hex(), "4c579bfba12518f98a78c62437f4e02d");
  EXPECT_EQ(chunk_key(head, doc), chunk_key_before_the_move(head, doc));
  EXPECT_EQ(chunk_key(Hash128{1, 2}, Hash128{3, 4}).to_hex(), "ce85011c3f8ee867df3579230b3a177b");
  // Same as the old function on other inputs too; the head and the document are not symmetric.
  for (uint64_t i = 0; i < 16; ++i) {
    const Hash128 a{i, i * 7 + 1}, b{i * 13 + 5, ~i};
    EXPECT_EQ(chunk_key(a, b), chunk_key_before_the_move(a, b)) << i;
    EXPECT_NE(chunk_key(a, b), chunk_key(b, a)) << i;
  }
  // Not any other kind of key over the same inputs.
  EXPECT_NE(chunk_key(head, doc), child_key(head, doc));
}

TEST(Keys, ScopeAndChildKeysArePinned) {
  const KvFormat f = test_format();
  EXPECT_EQ(chunk_scope_key(f, "").to_hex(), "a2b35218c16c42960e174a7c5dc9b87e");
  EXPECT_EQ(child_key(tree_scope_key(f, ""), doc_key(kHead)).to_hex(), "077332a5a1fcb8dd31f0078a07ea44f7");
  // The dtype is hashed by its segment code (bf16 = 2 since the first segment format): a bf16
  // pool's caches keep their keys whatever the enum's other values become.
  KvFormat b = f;
  b.dtype = KvDtype::kBF16;
  EXPECT_EQ(tree_scope_key(b, "").to_hex(), "2ad9f1503a3785f09351668332afd09b");
  EXPECT_EQ(chunk_scope_key(b, "tenant-a").to_hex(), "417f709a07a674ce8926ebc6363a8409");
}

// The key a chunk-cache entry is stored under (what an SSD or Redis tier holds): the store adds
// the scope to the pipeline's chunk key.
TEST(Keys, StoredChunkKeyIsPinned) {
  const KvFormat f = test_format();
  const Hash128 ck = chunk_key(doc_key(kHead), doc_key(kDoc));
  EXPECT_EQ(child_key(chunk_scope_key(f, ""), ck).to_hex(), "c07fd246b880ff9a7e43f847b681a163");
  EXPECT_EQ(child_key(chunk_scope_key(f, "tenant-a"), ck).to_hex(), "be5f3f4f793aa8a30b544ecb0973c94c");
  for (bool isolate : {false, true}) {
    Options o;
    o.tenant_isolation = isolate;
    auto store = KvStore::open(o, f);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    const auto kv = make_kv(f, static_cast<int>(kDoc.size()), 3);
    auto r = (*store)->insert_chunk(ck, kv.data(static_cast<int>(kHead.size())), "tenant-a");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->key.to_hex(), isolate ? "be5f3f4f793aa8a30b544ecb0973c94c" : "c07fd246b880ff9a7e43f847b681a163");
  }
}

// KV-event block hashes (kv_events.h) are what routers index: pinned like the keys.
TEST(Keys, EventBlockHashIsPinned) {
  std::vector<int32_t> block;
  for (int i = 1; i <= 16; ++i) block.push_back(i);
  const Hash128 scope{1, 2};
  const uint64_t first = event_block_hash(std::nullopt, block, scope);
  EXPECT_EQ(fmt::format("{:016x}", first), "3749295a29f13381");
  EXPECT_EQ(fmt::format("{:016x}", event_block_hash(first, block, scope)), "1905570d2026687e");
  EXPECT_NE(event_block_hash(uint64_t{0}, block, scope), first);  // "no parent" is not parent 0
}


// The request scope (tenant + cache_salt) and a document's key inside it are a stored format too:
// every tier, the shared remote one included, holds KV under them.
TEST(Keys, ScopedDocKeyAndRequestScopeArePinned) {
  EXPECT_EQ(kv_scope("tenant-a", ""), "tenant-a");
  EXPECT_EQ(kv_scope("tenant-a", "salt-1"), "8:tenant-a\x1fsalt:salt-1");
  EXPECT_NE(kv_scope("a", "bc"), kv_scope("ab", "c"));
  EXPECT_NE(kv_scope("", "s"), kv_scope("s", ""));
  const Hash128 d{3, 4};
  EXPECT_EQ(scoped_doc_key(d, ""), d);
  EXPECT_EQ(scoped_doc_key(d, "tenant-a").to_hex(), "584fecddd59beeaf1f45003b0bd7c1fb");
  EXPECT_EQ(scoped_doc_key(d, kv_scope("tenant-a", "salt-1")).to_hex(), "273ae6367437a049ccae274426e683bd");
  EXPECT_NE(scoped_doc_key(d, "tenant-a"), scoped_doc_key(d, "tenant-b"));
}

}  // namespace
}  // namespace ragd::kvstore

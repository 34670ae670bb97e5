// LexicalIndex: BM25 over chunk text with Xapian (Debian's libxapian 1.4), the lexical half of
// hybrid retrieval. A derived index, like the vector index: the document store is the truth, and
// this index records the store sequence number it covers (metadata "ragd_seq", written with every
// commit), so that after a crash the corpus replays the store's log after it (replace / delete by
// chunk id are idempotent) or rebuilds it from the stored chunks.
//
// One Xapian document per chunk:
//   terms     the chunk's title (wdf x kTitleWeight), section heading (x kSectionWeight) and text,
//             English stemmer, every word stemmed (STEM_ALL, unprefixed), stopwords left out;
//             counted by TermCounter (term_counter.h), which writes what Xapian's TermGenerator
//             would at a fraction of its cost.
//             STEM_ALL rather than Xapian's default STEM_SOME (stemmed "Z..." terms plus the
//             unstemmed forms): half the postings, ingest 1.5x faster, the same hit@k on the
//             retrieval benchmark. No positions: they made ingest 1.5x slower and the index 20 %
//             larger for no measured gain (a quoted phrase then matches as AND)
//   number    chunk c is document c / 2 + 1 of shard c % 2 (below), which Xapian numbers c + 1 when
//             the shards are searched as one (ids up to 2^32 - 2, Xapian 1.4's 32-bit numbers):
//             replace, delete and hits by it, ties broken by it
//   "XO<owner>" boolean owner term: "XO" for shared chunks, "XO<tenant>" for a tenant's; a
//             search is filtered by these inside the match (OP_FILTER), never after it
//   "XM<key>\x1f<value>" boolean metadata terms (metadata_filter.h): a filter is a boolean query
//             over them inside the match (OP_FILTER); a numeric range is the OR of the key's number
//             terms in range (found by walking the key's terms)
// Queries go through Xapian's QueryParser with the same stemmer, strategy and stopper, terms OR-ed;
// a query Xapian cannot parse is retried as plain words.
//
// Removal: the shards are written without term lists (DB_NO_TERMLIST): glass compresses and
// stores each document's term list as it is added, a third of Xapian's cost of an add, and only
// deletion and replacement read it. A removed chunk is a tombstone instead, as Lucene's deletions
// are: metadata "ragd_dead:<number>" committed with the shard (so replicas, snapshots and a crash
// see exactly what was committed), loaded at open, and every search, count and filter leaves
// tombstoned chunks out inside the match. Until the index is rebuilt they still count in BM25's
// statistics (document count, average length, term frequencies); compaction_due() says when
// they have grown to a quarter of a shard, and the corpus then rebuilds the index at open.
// A chunk already indexed is never replaced: chunk ids are not reused, so adding it again (a replay
// of the store's log) leaves it as it is.
//
// The term scheme has a version (metadata "ragd_terms", written with every commit): an index of
// another version answers format_current() false, and the corpus rebuilds it from the store.
// Version 5 writes the shards without term lists; version 4 numbers documents by chunk id in two
// shards; version 3 and older kept one database
// with a "Q<id>" term per chunk and the id as its data, found at open and rebuilt.
//
// Storage: two Xapian glass databases (shards) <data>/lexical/0 and /1, each with its own lock, so
// two threads write a batch's chunks at once and the shards commit in parallel; searched as one
// (Xapian's multi-database search: BM25 statistics of the whole). Each shard records the store
// sequence number with its commit; committed_seq() is the lower. `open_memory()` builds the
// shards in memory (read-only corpora whose on-disk index lags the store; Xapian's in-memory
// backend keeps a slot per document number up to the highest, so ids left unused by replaced
// documents cost a few tens of bytes each there).
//
// Thread-safety: internally synchronised (Xapian objects are not thread-safe): an update holds its
// shard's lock (terms are counted before, without it); a search holds every shard's lock, so
// searches are serialised with each other and with updates; each takes about a millisecond.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/retrieval/metadata_filter.h"

namespace ragd::retrieval {

struct LexicalDoc {
  uint64_t chunk_id = 0;
  std::string_view owner;  // "" = shared
  std::string_view title;
  std::string_view section;  // the chunk's section heading (corpus.cpp: the deepest of its path)
  std::string_view text;
  // Filter fields of its document: (key, canonical value) pairs (metadata_filter.h), indexed as
  // boolean terms "XM<key>\x1f<value>" (hashed to "XH<hex>" when longer than 200 bytes).
  std::span<const std::pair<std::string, std::string>> fields;
};

// The operator terms of `text` ("XS$@", "XS;;&"; "2>&1" gives "XS>&"), one per occurrence, in text
// order: runs of 2-6 ASCII punctuation bytes holding an operator character ($ & | ~ * ^ # ! < > = %
// @ `), quotes and . , trimmed from the ends. Indexed beside a chunk's words and added to a
// query's (lexical_index.cpp).
std::vector<std::string> symbol_terms(std::string_view text);

struct LexicalHit {
  uint64_t chunk_id = 0;
  double score = 0;  // BM25
};

class LexicalIndex {
 public:
  // Opens (creating) the database directory `path` for writing.
  static Result<std::unique_ptr<LexicalIndex>> open(const std::string& path);
  // Opens `path` read-only (committed state only); NotFound when there is no database.
  static Result<std::unique_ptr<LexicalIndex>> open_read_only(const std::string& path);
  // An empty in-memory index (writable, never committed anywhere).
  static Result<std::unique_ptr<LexicalIndex>> open_memory();
  // Copies the committed state of the index at `from` to `to` (which must not exist): each shard's
  // latest revision through Xapian's compaction, consistent while a writer commits beside it.
  // Tombstones and the sequence number come along, so the copy answers with the statistics of the
  // original. NotFound when `from` holds no index of this layout.
  static Status copy_committed(const std::string& from, const std::string& to);
  // Replaces this (writable, on-disk) index's content with the committed state of the index at
  // `from`, copied as copy_committed() does (a replica taking its primary's index). On failure the
  // index is left empty (a rebuild follows).
  Status adopt_committed(const std::string& from);
  ~LexicalIndex();

  // Adds the chunks (by id; one already indexed is left as it is). Turns a few hundred chunks at a time into Xapian documents
  // without the lock, then takes it to write them: calls from two threads with disjoint chunks
  // generate terms in parallel, and searches are not held up by a long batch.
  Status add(std::span<const LexicalDoc> docs);
  // Removes the chunks with these ids (absent ids are ignored).
  Status remove(std::span<const uint64_t> ids);
  // Deletes every chunk and every tombstone (a rebuild): the shards are made anew.
  Status clear();
  // Makes the changes durable, recording that the index covers the store up to `seq`.
  Status commit(uint64_t seq);
  // The store sequence number of the last commit (0 = none).
  uint64_t committed_seq() const;
  uint64_t size() const;
  // Whether tombstones have reached kCompactionMinDead and a quarter of some shard's documents:
  // then a rebuild restores exact BM25 statistics and reclaims their space.
  bool compaction_due() const;
  // Whether the index was written with this build's term scheme (true for an empty index).
  bool format_current() const;
  // Whether chunk `id` is in the index.
  Result<bool> contains(uint64_t id) const;

  // The k best chunks for `query` among those whose owner is in `owners` (nullopt = every owner;
  // "" in the list = the shared chunks). An empty or stopword-only query has no hits.
  // `filter` (nullable): only chunks whose document satisfies it.
  Result<std::vector<LexicalHit>> search(std::string_view query, int k,
                                         const std::optional<std::vector<std::string>>& owners,
                                         const MetadataFilter* filter = nullptr) const;
  // For each term (as lexical_terms() writes them), the share of the chunks of `owners` (nullopt =
  // every chunk) that hold it, in [0, 1]; 0 for every term when those owners hold no chunk. Counted
  // exactly inside the owner filter (another tenant's chunks never count).
  Result<std::vector<double>> term_shares(std::span<const std::string> terms,
                                          const std::optional<std::vector<std::string>>& owners) const;
  // Every chunk id that satisfies `filter` among `owners` (the dense search's allow-list), sorted.
  Result<std::vector<uint64_t>> matching(const MetadataFilter& filter,
                                         const std::optional<std::vector<std::string>>& owners) const;

 private:
  LexicalIndex();
  Status add_slice(std::span<const LexicalDoc> docs);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ragd::retrieval

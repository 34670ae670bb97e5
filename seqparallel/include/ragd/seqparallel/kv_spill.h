// The older KV of one long sequence, moved out of the KV pool when the pool cannot hold the whole
// sequence: first to host memory, then to a file on the SSD tier. Attention reads it where it lives
// (in the manner of InstInfer: the KV is not brought back into the pool): per layer, the queries
// attend over the spilled keys and the partial (O, LSE) is merged into the pool's, as sharded decode
// merges the ranks' partials.
//
// Extents: every append() moves a run of the sequence's oldest resident slots as one extent. In
// memory an extent is one buffer per layer; on the SSD tier it is one region per layer in the spill
// file, laid out layer-major so that one layer of one extent is one sequential read:
//   [K rows | V rows | K scales | V scales (int8 only)], in the pool's storage type (so a spilled key
//   is exactly what the pool held: bf16 / int8 pools spill half / about a quarter of the f32 bytes),
//   each region padded to 4 KiB for direct I/O. Positions stay in memory (4 bytes a token).
// Each SSD region carries an xxh3-64 of its bytes, checked after every read (Corruption naming the
// layer and extent on a mismatch).
//
// Why a file of our own and not the RocksDB tier: a spilled extent is written once, read whole
// layer by layer on every decode step and dropped with its request; a key-value store would add a
// write-ahead log, compaction and per-key lookups to a stream of large sequential reads.
//
// Read-ahead: reading layer l of the SSD extents starts when layer l-1 is attended (and layer 0
// when the last layer is), on a thread of this object, into the other of two buffers; the reads
// are direct (O_DIRECT, bypassing the page cache) where the file system allows it, so the numbers
// are the device's. stats() says how long attention waited for the reads.
//
// Thread-safety: one thread calls every method (the rank's thread); the read-ahead thread is
// internal. Not copyable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"

namespace ragd::seqparallel {

struct SpillOptions {
  // Host memory for spilled KV (bytes); extents that do not fit go to the SSD tier.
  int64_t dram_bytes = 0;
  // Folder of the spill file (the SSD tier); empty = no SSD tier. The file is created unlinked
  // (O_TMPFILE where the file system has it), so nothing is left behind by a crash.
  std::string dir;
  // Direct reads from the spill file (falls back to buffered reads where O_DIRECT is refused).
  bool direct_io = true;
  bool enabled() const { return dram_bytes > 0 || !dir.empty(); }
};

struct SpillStats {
  int64_t dram_tokens = 0, ssd_tokens = 0;  // spilled tokens in each tier
  int64_t dram_bytes = 0, ssd_bytes = 0;    // their stored bytes (SSD: the file's regions)
  int extents = 0;
  int64_t bytes_read = 0;   // read from the SSD tier so far
  double read_s = 0;        // the read-ahead thread's time in reads and checksums
  double wait_s = 0;        // attention's time waiting for a layer's reads
  double attend_s = 0;      // attention over spilled keys (with the waits)
  bool direct_io = false;   // the SSD reads bypass the page cache
};

class KvSpill {
 public:
  // layout: the pool's. InvalidArgument when options enable nothing; IOError when the folder
  // cannot take a file.
  static Result<std::unique_ptr<KvSpill>> create(const engine::KvLayout& layout, const SpillOptions& options);
  ~KvSpill();
  KvSpill(const KvSpill&) = delete;
  KvSpill& operator=(const KvSpill&) = delete;

  int64_t tokens() const { return tokens_; }
  // From now on append() takes slots in any position order: once a sequence is prefilled, every
  // query (a decode step's) is above every key, so attention needs no order among them, and a
  // shard that took another worker's KV (ShardedSequence::shrink) holds interleaved positions.
  void allow_any_order() { any_order_ = true; }
  // Largest spilled position (-1 when empty): every later query sees every spilled key.
  int32_t max_position() const { return max_pos_; }
  SpillStats stats() const;
  // The spill file (-1 without an SSD tier), for diagnostics and tests.
  int file_descriptor() const { return fd_; }

  // Copies slots [0, n) of `table` (every layer, the stored bytes) to the end of the spill, as
  // one extent. The caller then drops those slots from its table. The slots must hold tokens (no
  // holes) at positions above every spilled one, in increasing order — unless allow_any_order()
  // was called. Unimplemented unless the pool's storage is host
  // memory (HostKvStorage); IOError from the file.
  Status append(const engine::KvPool& pool, const engine::BlockTable& table, int n);

  // Attention of n_q query rows (q: [n_q, num_heads, head_dim], positions q_pos) over the spilled
  // keys of `layer` each may see, merged into (out, lse) ([n_q, num_heads, head_dim], [n_q,
  // num_heads]) by LSE. Layers are expected in order (0 .. L-1, then 0 again): that is the order
  // the read-ahead follows. Corruption on a checksum mismatch, IOError on a failed read.
  Status attend(int layer, const float* q, int n_q, int num_heads, const int32_t* q_pos, float scale, float* out,
                float* lse);

  // One layer's spilled rows, extent by extent, in the pool's storage type ([rows, kv_heads,
  // head_dim] K and V; int8 scales [rows, kv_heads]; positions [rows]): what a ring prefill sends
  // of this rank's older KV. fn returns a Status; the first error stops the walk.
  struct Rows {
    int64_t n = 0;
    const void* k = nullptr;
    const void* v = nullptr;
    const float* k_scale = nullptr;
    const float* v_scale = nullptr;
    const int32_t* pos = nullptr;
  };
  Status for_each_rows(int layer, const std::function<Status(const Rows&)>& fn);

 private:
  struct Extent;
  class Reader;
  KvSpill(const engine::KvLayout& layout, const SpillOptions& options);
  Status open_file();
  // Makes layer's SSD regions readable (waits for / runs the read) and starts the next layer's.
  Status load(int layer);
  // Reads one layer of every SSD extent into dst (the read-ahead thread) and checks the checksums.
  Status read_layer(int layer, unsigned char* dst) const;
  Rows rows(int layer, size_t extent) const;

  engine::KvLayout layout_;
  SpillOptions opt_;
  std::vector<Extent> extents_;
  std::vector<int32_t> positions_;  // [tokens_]
  int64_t tokens_ = 0;
  int32_t max_pos_ = -1;
  bool any_order_ = false;
  int fd_ = -1, direct_fd_ = -1;
  int64_t file_end_ = 0;
  std::unique_ptr<Reader> reader_;
  int current_layer_ = -1;  // the layer whose SSD regions are in reader_'s buffer current_buf_
  int current_buf_ = 0;
  std::vector<float> o_, l_;  // attend()'s partial state
  SpillStats stats_;
};

}  // namespace ragd::seqparallel

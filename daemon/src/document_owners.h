// Which tenant ingested which document id, so that one tenant gets 403 on another's documents.
// Persisted as an append-only log (<data_dir>/daemon/document_owners.log: "put\tID\tTENANT" and
// "del\tID" lines) replayed at start; in memory only when no directory is given. Documents
// without a record (ingested offline with `ragctl ingest`) belong to every tenant.
// Thread-safety: thread-safe.
#pragma once

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "ragd/common/status.h"

namespace ragd::daemon {

class DocumentOwners {
 public:
  DocumentOwners() = default;
  ~DocumentOwners();
  // Replays the log in `dir` (created if needed). "" = memory only.
  [[nodiscard]] Status open(const std::string& dir);
  std::optional<std::string> owner(const std::string& id) const;
  // Claims `id` for `tenant` unless another tenant owns it. Returns false when it belongs to
  // someone else; *newly set when the claim created the record.
  bool claim(const std::string& id, const std::string& tenant, bool* newly);
  void release(const std::string& id);

 private:
  void append(const std::string& line);
  mutable std::mutex mu_;
  std::map<std::string, std::string> owners_;  // guarded by mu_
  std::FILE* log_ = nullptr;                   // guarded by mu_
};

}  // namespace ragd::daemon

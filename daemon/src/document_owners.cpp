#include "document_owners.h"

#include <filesystem>
#include <fstream>

#include "ragd/common/log.h"

namespace ragd::daemon {

DocumentOwners::~DocumentOwners() {
  if (log_) std::fclose(log_);
}

Status DocumentOwners::open(const std::string& dir) {
  if (dir.empty()) return Status::OK();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError(dir + ": cannot create directory: " + ec.message());
  std::string path = dir + "/document_owners.log";
  {
    std::ifstream in(path);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      auto t1 = line.find('\t');
      if (t1 == std::string::npos) continue;  // torn last line after a crash
      std::string op = line.substr(0, t1);
      if (op == "put") {
        auto t2 = line.find('\t', t1 + 1);
        if (t2 == std::string::npos) continue;
        owners_[line.substr(t1 + 1, t2 - t1 - 1)] = line.substr(t2 + 1);
      } else if (op == "del") {
        owners_.erase(line.substr(t1 + 1));
      } else {
        log::daemon()->warn("{}:{}: unknown record '{}' ignored", path, n, op);
      }
    }
  }
  log_ = std::fopen(path.c_str(), "a");
  if (!log_) return Status::IOError(path + ": cannot open for append");
  return Status::OK();
}

std::optional<std::string> DocumentOwners::owner(const std::string& id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = owners_.find(id);
  if (it == owners_.end()) return std::nullopt;
  return it->second;
}

bool DocumentOwners::claim(const std::string& id, const std::string& tenant, bool* newly) {
  std::lock_guard<std::mutex> l(mu_);
  *newly = false;
  auto it = owners_.find(id);
  if (it != owners_.end()) return it->second == tenant;
  owners_[id] = tenant;
  *newly = true;
  append("put\t" + id + "\t" + tenant + "\n");
  return true;
}

void DocumentOwners::release(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  if (owners_.erase(id)) append("del\t" + id + "\n");
}

void DocumentOwners::append(const std::string& line) {
  if (!log_) return;
  std::fwrite(line.data(), 1, line.size(), log_);
  std::fflush(log_);
}

}  // namespace ragd::daemon

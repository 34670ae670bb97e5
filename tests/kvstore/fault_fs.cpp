#include "fault_fs.h"

namespace ragd::kvstore {
namespace {

rocksdb::IOStatus injected_write_failure(SsdFaults& f) {
  if (f.no_space.load()) {
    f.injected.fetch_add(1);
    return rocksdb::IOStatus::NoSpace("injected", "No space left on device");
  }
  if (f.write_error.load()) {
    f.injected.fetch_add(1);
    return rocksdb::IOStatus::IOError("injected", "write error");
  }
  return rocksdb::IOStatus::OK();
}

class FaultWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultWritableFile(std::unique_ptr<rocksdb::FSWritableFile> f, std::shared_ptr<SsdFaults> faults)
      : FSWritableFileOwnerWrapper(std::move(f)), faults_(std::move(faults)) {}
  rocksdb::IOStatus Append(const rocksdb::Slice& d, const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    auto s = injected_write_failure(*faults_);
    return s.ok() ? target()->Append(d, o, g) : s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& d, const rocksdb::IOOptions& o, const rocksdb::DataVerificationInfo& v,
                           rocksdb::IODebugContext* g) override {
    auto s = injected_write_failure(*faults_);
    return s.ok() ? target()->Append(d, o, v, g) : s;
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    auto s = injected_write_failure(*faults_);
    return s.ok() ? target()->Sync(o, g) : s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    auto s = injected_write_failure(*faults_);
    return s.ok() ? target()->Fsync(o, g) : s;
  }

 private:
  std::shared_ptr<SsdFaults> faults_;
};

class FaultRandomAccessFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  FaultRandomAccessFile(std::unique_ptr<rocksdb::FSRandomAccessFile> f, std::shared_ptr<SsdFaults> faults)
      : FSRandomAccessFileOwnerWrapper(std::move(f)), faults_(std::move(faults)) {}
  rocksdb::IOStatus Read(uint64_t off, size_t n, const rocksdb::IOOptions& o, rocksdb::Slice* r, char* scratch,
                         rocksdb::IODebugContext* g) const override {
    if (faults_->read_error.load()) {
      faults_->injected.fetch_add(1);
      return rocksdb::IOStatus::IOError("injected", "read error");
    }
    return target()->Read(off, n, o, r, scratch, g);
  }
  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* g) override {
    if (faults_->read_error.load()) {
      faults_->injected.fetch_add(1);
      for (size_t i = 0; i < num; ++i) reqs[i].status = rocksdb::IOStatus::IOError("injected", "read error");
      return rocksdb::IOStatus::IOError("injected", "read error");
    }
    return target()->MultiRead(reqs, num, o, g);
  }

 private:
  std::shared_ptr<SsdFaults> faults_;
};

// The default file system with failures injected on demand.
class FaultFileSystem : public rocksdb::FileSystemWrapper {
 public:
  FaultFileSystem(std::shared_ptr<rocksdb::FileSystem> base, std::shared_ptr<SsdFaults> faults)
      : FileSystemWrapper(std::move(base)), faults_(std::move(faults)) {}
  static const char* kClassName() { return "RagdFaultFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& fo,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* g) override {
    std::unique_ptr<rocksdb::FSWritableFile> base;
    auto s = target()->NewWritableFile(f, fo, &base, g);
    if (s.ok()) r->reset(new FaultWritableFile(std::move(base), faults_));
    return s;
  }
  rocksdb::IOStatus NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& fo,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                        rocksdb::IODebugContext* g) override {
    std::unique_ptr<rocksdb::FSRandomAccessFile> base;
    auto s = target()->NewRandomAccessFile(f, fo, &base, g);
    if (s.ok()) r->reset(new FaultRandomAccessFile(std::move(base), faults_));
    return s;
  }

 private:
  std::shared_ptr<SsdFaults> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> make_fault_file_system(std::shared_ptr<rocksdb::FileSystem> base,
                                                            std::shared_ptr<SsdFaults> faults) {
  return std::make_shared<FaultFileSystem>(std::move(base), std::move(faults));
}

}  // namespace ragd::kvstore

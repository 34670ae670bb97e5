// Standalone driver for the fuzz targets where libFuzzer is not available (g++ builds):
//
//   fuzz_<name> [--seconds S] [--seed N] [--max-len L] [--timeout T] [--rss-limit-mb M] PATH...
//
// Runs every file under each PATH (a file or a directory, walked recursively; hidden files and a
// missing directory are skipped) through LLVMFuzzerTestOneInput, then, for S seconds (default 3),
// random mutations of those inputs: bit flips, byte overwrites, truncations, insertions, deletions,
// duplicated ranges and splices of two inputs, seeded by N (default 1) so that a run repeats.
//
// A crash, an abort (failed check, uncaught exception, sanitizer report with abort_on_error), an
// input running longer than T seconds (default 10) or one needing more than M MiB of address
// space (default 1024, where every target runs in well under 768; an oversized allocation then
// fails with bad_alloc and aborts, without touching gigabytes first; 0 = none; not applied under
// ASan or TSan, which reserve far more address space) stops the run: the input is written to
// ./replay-crash-<target>.bin and the process dies with the signal. Exit 0 otherwise. A parser
// that rejects an input is not a failure.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// The input being run, for the signal handlers (written with write(2) only).
const uint8_t* g_current = nullptr;
size_t g_current_size = 0;
char g_crash_path[512] = "replay-crash.bin";

void write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w <= 0) return;
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void say(const char* s) { write_all(2, s, std::strlen(s)); }

void on_fatal_signal(int sig) {
  say(sig == SIGALRM ? "\nreplay: input timed out; saving it to " : "\nreplay: fatal signal; saving the input to ");
  say(g_crash_path);
  say("\n");
  int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (g_current) write_all(fd, g_current, g_current_size);
    ::close(fd);
  }
  signal(sig == SIGALRM ? SIGABRT : sig, SIG_DFL);
  raise(sig == SIGALRM ? SIGABRT : sig);
}

void install_handlers() {
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGALRM}) {
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(sig, &sa, nullptr);
  }
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

void limit_memory(uint64_t mib) {
  if (mib == 0 || kSanitized) return;
  rlimit rl{};
  rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(mib) << 20;
  if (setrlimit(RLIMIT_AS, &rl) != 0) std::perror("replay: setrlimit(RLIMIT_AS)");
}

void run_one(const Bytes& in, int timeout_s) {
  // Copy into an exact-size heap buffer so that reads past the end hit a sanitizer redzone.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[in.size() == 0 ? 1 : in.size()]);
  if (!in.empty()) std::memcpy(buf.get(), in.data(), in.size());
  g_current = buf.get();
  g_current_size = in.size();
  alarm(static_cast<unsigned>(timeout_s));
  LLVMFuzzerTestOneInput(buf.get(), in.size());
  alarm(0);
  g_current = nullptr;
  g_current_size = 0;
}

bool read_file(const fs::path& p, Bytes* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

void collect(const fs::path& p, std::vector<fs::path>* files) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) {
    files->push_back(p);
    return;
  }
  if (!fs::is_directory(p, ec)) return;
  std::vector<fs::path> found;
  for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  files->insert(files->end(), found.begin(), found.end());
}

// One random edit of `b` (inputs from `pool` for splices), keeping it at most max_len bytes.
void mutate(Bytes* b, const std::vector<Bytes>& pool, std::mt19937_64& rng, size_t max_len) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static const uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '"', '\\', '{', '}', '[', ']', ',', ':',
                                         '=', '\n', '\r', '<', '>', '/', '-', '0', '9', 'e', '.'};
  switch (rng() % 8) {
    case 0:  // flip one bit
      if (!b->empty()) (*b)[pick(b->size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1:  // overwrite one byte, often with a byte that means something to a parser
      if (!b->empty())
        (*b)[pick(b->size())] = rng() % 2 ? kInteresting[pick(sizeof kInteresting)] : static_cast<uint8_t>(rng());
      break;
    case 2:  // truncate
      if (!b->empty()) b->resize(pick(b->size()));
      break;
    case 3: {  // insert a few bytes
      size_t at = pick(b->size() + 1), n = 1 + pick(8);
      Bytes ins(n);
      for (auto& c : ins) c = rng() % 2 ? kInteresting[pick(sizeof kInteresting)] : static_cast<uint8_t>(rng());
      b->insert(b->begin() + static_cast<ptrdiff_t>(at), ins.begin(), ins.end());
      break;
    }
    case 4: {  // delete a range
      if (b->empty()) break;
      size_t at = pick(b->size()), n = 1 + pick(std::min<size_t>(16, b->size() - at));
      b->erase(b->begin() + static_cast<ptrdiff_t>(at), b->begin() + static_cast<ptrdiff_t>(at + n));
      break;
    }
    case 5: {  // duplicate a range in place
      if (b->empty()) break;
      size_t at = pick(b->size()), n = 1 + pick(std::min<size_t>(64, b->size() - at));
      Bytes chunk(b->begin() + static_cast<ptrdiff_t>(at), b->begin() + static_cast<ptrdiff_t>(at + n));
      size_t to = pick(b->size() + 1);
      b->insert(b->begin() + static_cast<ptrdiff_t>(to), chunk.begin(), chunk.end());
      break;
    }
    case 6: {  // splice: a prefix of this input and a suffix of another
      if (pool.empty()) break;
      const Bytes& o = pool[pick(pool.size())];
      size_t cut = pick(b->size() + 1), from = pick(o.size() + 1);
      b->resize(cut);
      b->insert(b->end(), o.begin() + static_cast<ptrdiff_t>(from), o.end());
      break;
    }
    default: {  // overwrite a 1, 2, 4 or 8-byte field with a boundary value (binary headers)
      if (b->empty()) break;
      static const uint64_t kValues[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0xffffffff,
                                         0x100000000ull, 0x7fffffffffffffffull, ~0ull};
      size_t w = size_t{1} << pick(4);
      if (w > b->size()) w = b->size();
      uint64_t v = kValues[pick(std::size(kValues))];
      std::memcpy(b->data() + pick(b->size() - w + 1), &v, w);
      break;
    }
  }
  if (b->size() > max_len) b->resize(max_len);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  uint64_t seed = 1;
  size_t max_len = 64 * 1024;
  int timeout_s = 10;
  uint64_t rss_limit_mb = 1024;
  std::vector<fs::path> paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "replay: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds") seconds = std::atof(value("--seconds"));
    else if (a == "--seed") seed = std::strtoull(value("--seed"), nullptr, 10);
    else if (a == "--max-len") max_len = std::strtoull(value("--max-len"), nullptr, 10);
    else if (a == "--timeout") timeout_s = std::max(1, std::atoi(value("--timeout")));
    else if (a == "--rss-limit-mb") rss_limit_mb = std::strtoull(value("--rss-limit-mb"), nullptr, 10);
    else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [--seconds S] [--seed N] [--max-len L] [--timeout T] [--rss-limit-mb M] PATH...\n",
                  argv[0]);
      return 0;
    } else paths.emplace_back(a);
  }
  std::snprintf(g_crash_path, sizeof g_crash_path, "replay-crash-%s.bin",
                fs::path(argv[0]).filename().string().c_str());
  install_handlers();
  limit_memory(rss_limit_mb);
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);

  std::vector<fs::path> files;
  for (const auto& p : paths) collect(p, &files);
  std::vector<Bytes> pool;
  for (const auto& f : files) {
    Bytes b;
    if (!read_file(f, &b)) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 2;
    }
    run_one(b, timeout_s);
    pool.push_back(std::move(b));
  }
  std::printf("replay: %zu corpus inputs ok\n", files.size());
  if (pool.empty()) pool.emplace_back();

  std::mt19937_64 rng(seed);
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(seconds);
  uint64_t runs = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    Bytes b = pool[rng() % pool.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) mutate(&b, pool, rng, max_len);
    run_one(b, timeout_s);
    ++runs;
    // Keep some mutants as parents so that edits accumulate (no coverage feedback here).
    if (runs % 16 == 0 && pool.size() < 4096) pool.push_back(std::move(b));
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("replay: %llu mutated inputs in %.1f s (seed %llu), no crash\n", static_cast<unsigned long long>(runs),
              took, static_cast<unsigned long long>(seed));
  return 0;
}

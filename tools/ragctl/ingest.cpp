// ragctl ingest PATH... [--data DIR | --url http://host:port] [--chunk-tokens N] [--embedder NAME]
//                      [--embedder-model DIR [--embedder-pooling P] [--query-prefix S] [--document-prefix S]]
//                      [--index SPEC] [--model DIR] [--skip-unsupported]
// Reads .txt/.md/.html/.jsonl/.pdf files and directories (formats by content, reader.h), and either
// writes them into a data directory (chunk, embed, index; durable per batch) or sends them to a
// running daemon's document API (POST /v1/documents). Shows a progress bar on a terminal, periodic
// lines otherwise, and a summary with the reason for every file or record left out.
// Exit status: 0 when every input became documents; 3 when the run finished (what was read is
// ingested and durable) but some input did not: a rejected file or record (damaged, encrypted or
// image-only PDF, invalid UTF-8, malformed JSONL, ...), a document the corpus refused, or a file of
// a format ragd does not read. --skip-unsupported accepts the last kind only (counted and listed,
// exit 0); rejections still give 3, since they are files the user meant to ingest. 1 is a failure
// (corpus, daemon), 2 a usage error.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.h"
#include "env_or.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/corpus.h"
#include "ragd/retrieval/reader.h"
#include "ragd/retrieval/text_util.h"

namespace ragd::tools {
namespace {

using namespace ragd::retrieval;
using Clock = std::chrono::steady_clock;

struct IngestArgs {
  std::vector<std::string> paths;
  std::string data;
  std::string url;
  std::string model;
  int chunk_tokens = 256;
  int overlap = 0;
  std::string embedder;
  int dim = 384;
  std::string embedder_model;
  std::string embedder_pooling;          // "" = as the checkpoint's files say
  std::string embedder_query_prefix;     // recorded in the corpus, applied to searches
  std::string embedder_document_prefix;  // applied to every passage
  std::string index;
  double batch_mb = 4.0;
  bool quiet = false;
  bool skip_unsupported = false;  // files of unsupported formats do not make the exit status 3
};

// Exit status when the run finished but some input did not become documents (see the top).
constexpr int kExitInputsLeftOut = 3;

std::string fmt_duration(double s) {
  if (!(s >= 0) || s > 359999) return "--:--";
  int t = static_cast<int>(s + 0.5);
  char b[32];
  if (t >= 3600) std::snprintf(b, sizeof b, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(b, sizeof b, "%d:%02d", t / 60, t % 60);
  return b;
}

// Progress on stderr: a redrawn bar on a terminal, a plain line every 5 s otherwise.
class Progress {
 public:
  Progress(size_t files, uint64_t bytes, bool quiet)
      : total_files_(files), total_bytes_(bytes), tty_(::isatty(STDERR_FILENO) == 1), quiet_(quiet) {}
  void update(size_t files, uint64_t bytes, uint64_t chunks, bool final = false) {
    if (quiet_) return;
    auto now = Clock::now();
    double since = std::chrono::duration<double>(now - last_).count();
    if (!final && since < (tty_ ? 0.1 : 5.0)) return;
    last_ = now;
    double el = std::chrono::duration<double>(now - start_).count();
    double mbs = el > 0 ? static_cast<double>(bytes) / 1e6 / el : 0;
    double frac = total_bytes_ ? static_cast<double>(bytes) / static_cast<double>(total_bytes_)
                               : (total_files_ ? static_cast<double>(files) / static_cast<double>(total_files_) : 1.0);
    double eta = frac > 0 ? el * (1 - frac) / frac : -1;
    if (tty_) {
      int w = 28, fill = static_cast<int>(frac * w + 0.5);
      std::string bar(static_cast<size_t>(fill), '#');
      bar.resize(static_cast<size_t>(w), '.');
      std::fprintf(stderr, "\r[%s] %3.0f%%  files %zu/%zu  chunks %llu  %.2f MB/s  ETA %s   ", bar.c_str(), frac * 100,
                   files, total_files_, static_cast<unsigned long long>(chunks), mbs, fmt_duration(eta).c_str());
      if (final) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "ingest: files %zu/%zu (%.0f%%), chunks %llu, %.2f MB/s, ETA %s\n", files, total_files_,
                   frac * 100, static_cast<unsigned long long>(chunks), mbs, fmt_duration(eta).c_str());
    }
    std::fflush(stderr);
  }

 private:
  size_t total_files_;
  uint64_t total_bytes_;
  bool tty_, quiet_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = Clock::time_point{};
};

// ---- a minimal blocking HTTP/1.1 client (POST with Content-Length, Connection: close) ----------
struct Url {
  std::string host, port, prefix;
};

Result<Url> parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return Status::InvalidArgument("--url '" + url + "': only http:// URLs are supported");
  std::string rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  Url u;
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  size_t colon = hostport.rfind(':');
  if (colon == std::string::npos) {
    u.host = hostport;
    u.port = "80";
  } else {
    u.host = hostport.substr(0, colon);
    u.port = hostport.substr(colon + 1);
  }
  if (u.host.empty()) return Status::InvalidArgument("--url '" + url + "': no host");
  return u;
}

struct HttpResponse {
  int status = 0;
  std::string body;
};

Result<HttpResponse> http_post(const Url& u, const std::string& path, const std::string& body) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(u.host.c_str(), u.port.c_str(), &hints, &res);
  if (rc != 0) return Status::Unavailable(u.host + ":" + u.port + ": " + gai_strerror(rc));
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) return Status::Unavailable(u.host + ":" + u.port + ": cannot connect: " + std::strerror(errno));
  timeval tv{300, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string req = "POST " + u.prefix + path + " HTTP/1.1\r\nHost: " + u.host + ":" + u.port +
                    "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n";
  if (const char* key = std::getenv("RAGD_API_KEY")) req += std::string("Authorization: Bearer ") + key + "\r\n";
  req += "\r\n";
  req += body;
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return Status::Unavailable(u.host + ":" + u.port + ": send: " + std::strerror(e));
    }
    off += static_cast<size_t>(n);
  }
  std::string resp;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  HttpResponse r;
  if (resp.rfind("HTTP/1.", 0) != 0 || resp.size() < 12)
    return Status::Unavailable(u.host + ":" + u.port + ": no HTTP response");
  r.status = std::atoi(resp.c_str() + 9);
  size_t hdr_end = resp.find("\r\n\r\n");
  std::string headers = resp.substr(0, hdr_end);
  r.body = hdr_end == std::string::npos ? "" : resp.substr(hdr_end + 4);
  // Undo chunked transfer encoding if the server used it.
  std::string lower = headers;
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower.find("transfer-encoding: chunked") != std::string::npos) {
    std::string out;
    size_t p = 0;
    while (p < r.body.size()) {
      size_t e = r.body.find("\r\n", p);
      if (e == std::string::npos) break;
      size_t len = std::strtoul(r.body.substr(p, e - p).c_str(), nullptr, 16);
      if (len == 0) break;
      out += r.body.substr(e + 2, len);
      p = e + 2 + len + 2;
    }
    r.body = out;
  }
  return r;
}

// Integer field of a flat JSON response ("ingested": 3); 0 when absent.
uint64_t json_count(const std::string& body, const std::string& key) {
  size_t p = body.find("\"" + key + "\"");
  if (p == std::string::npos) return 0;
  p = body.find(':', p);
  if (p == std::string::npos) return 0;
  return std::strtoull(body.c_str() + p + 1, nullptr, 10);
}

// ---- the command -----------------------------------------------------------------------------

struct Totals {
  IngestSummary sum;
  std::vector<SkippedInput> skipped;  // files/records that never became documents
  std::vector<InputNote> notes;       // read, with something not used (JSONL keys)
  uint64_t empty_pages = 0;           // PDF pages without text
};

int run_ingest(const IngestArgs& a) {
  auto t0 = Clock::now();
  if (!a.url.empty() && !a.data.empty()) {
    std::fprintf(stderr, "ragctl ingest: give either --data or --url, not both\n");
    return 2;
  }
  Totals tot;
  auto files = list_input_files(a.paths, &tot.skipped);
  if (!files.ok()) {
    std::fprintf(stderr, "ragctl ingest: %s\n", files.status().message().c_str());
    return 2;
  }
  uint64_t total_bytes = 0;
  for (const auto& f : *files) total_bytes += f.bytes;

  std::unique_ptr<Corpus> corpus;
  Url url;
  if (!a.url.empty()) {
    auto u = parse_url(a.url);
    if (!u.ok()) {
      std::fprintf(stderr, "ragctl ingest: %s\n", u.status().message().c_str());
      return 2;
    }
    url = *u;
  } else {
    std::string data = a.data.empty() ? env_or("RAGD_DATA", "./data") : a.data;
    std::string model = a.model.empty() ? env_or("RAGD_MODEL", "./data/model") : a.model;
    auto tok = engine::Tokenizer::from_file(model + "/tokenizer.json");
    if (!tok.ok()) {
      std::fprintf(stderr, "ragctl ingest: tokenizer for chunking: %s\n(pass --model DIR with a tokenizer.json)\n",
                   tok.status().to_string().c_str());
      return 2;
    }
    CorpusOptions o;
    o.chunker.chunk_tokens = a.chunk_tokens;
    o.chunker.overlap_tokens = a.overlap;
    o.embedder.name = a.embedder;
    o.embedder.dim = a.dim;
    o.embedder.model_dir = a.embedder_model;
    // A new corpus without an embedder named gets the shipped term vectors (hybrid search by
    // default), or the hashing embedder when they are not there; an existing one keeps its own.
    if (a.embedder.empty() && a.embedder_model.empty()) o.embedder.name = "auto";
    o.embedder.pooling = a.embedder_pooling;
    o.embedder.query_prefix = a.embedder_query_prefix;
    o.embedder.document_prefix = a.embedder_document_prefix;
    o.index_spec = a.index;
    o.index.omp_threads = 0;  // a batch tool: let FAISS use the cores
    auto c = Corpus::open(data, o, std::shared_ptr<const engine::Tokenizer>(std::move(tok).value()));
    if (!c.ok()) {
      std::fprintf(stderr, "ragctl ingest: %s\n", c.status().to_string().c_str());
      return 1;
    }
    corpus = std::move(c).value();
  }

  Progress progress(files->size(), total_bytes, a.quiet);
  std::vector<Document> batch;
  uint64_t batch_bytes = 0, done_bytes = 0;
  const uint64_t max_batch = static_cast<uint64_t>(a.batch_mb * 1e6);
  auto flush = [&]() -> bool {
    if (batch.empty()) return true;
    if (corpus) {
      auto s = corpus->ingest(batch);
      if (!s.ok()) {
        std::fprintf(stderr, "\nragctl ingest: %s\n", s.status().to_string().c_str());
        return false;
      }
      tot.sum.ingested += s->ingested;
      tot.sum.unchanged += s->unchanged;
      tot.sum.replaced += s->replaced;
      tot.sum.rejected += s->rejected;
      tot.sum.chunks_added += s->chunks_added;
      tot.sum.chunks_removed += s->chunks_removed;
      tot.sum.bytes += s->bytes;
      tot.sum.problems.insert(tot.sum.problems.end(), s->problems.begin(), s->problems.end());
    } else {
      std::string body = "{\"documents\":[";
      for (size_t i = 0; i < batch.size(); ++i) {
        if (i) body += ',';
        body += "{\"id\":";
        append_json_string(&body, batch[i].id);
        body += ",\"title\":";
        append_json_string(&body, batch[i].title);
        body += ",\"text\":";
        append_json_string(&body, batch[i].text);
        body += ",\"source\":";
        append_json_string(&body, batch[i].source);
        // What the reader found, so the daemon's copy cites like a local ingest's: the text is
        // already extracted (sections given), the format is its label.
        const Document& d = batch[i];
        if (!d.url.empty()) {
          body += ",\"url\":";
          append_json_string(&body, d.url);
        }
        if (!d.format.empty()) {
          body += ",\"format\":";
          // (an HTML page without headings would be parsed again as HTML: sent as text)
          append_json_string(&body, d.format == "html" && d.sections.empty() ? std::string("text") : d.format);
        }
        if (d.page > 0) body += ",\"page\":" + std::to_string(d.page);
        if (!d.metadata.empty()) {
          body += ",\"metadata\":{";
          for (size_t m = 0; m < d.metadata.size(); ++m) {
            if (m) body += ',';
            append_json_string(&body, d.metadata[m].first);
            body += ':';
            body += d.metadata[m].second;  // minified JSON, checked by the reader
          }
          body += '}';
        }
        if (!d.sections.empty()) {
          body += ",\"sections\":[";
          for (size_t s = 0; s < d.sections.size(); ++s) {
            const Section& sec = d.sections[s];
            body += s ? ",{\"path\":[" : "{\"path\":[";
            for (size_t h = 0; h < sec.path.size(); ++h) {
              if (h) body += ',';
              append_json_string(&body, sec.path[h]);
            }
            body += "],\"byte_begin\":" + std::to_string(sec.byte_begin) + ",\"byte_end\":" + std::to_string(sec.byte_end) + '}';
          }
          body += ']';
        }
        body += '}';
      }
      body += "]}";
      auto r = http_post(url, "/v1/documents", body);
      if (!r.ok()) {
        std::fprintf(stderr, "\nragctl ingest: %s\n", r.status().message().c_str());
        return false;
      }
      if (r->status < 200 || r->status >= 300) {
        std::fprintf(stderr, "\nragctl ingest: daemon answered %d: %s\n", r->status, r->body.c_str());
        return false;
      }
      tot.sum.ingested += json_count(r->body, "ingested");
      tot.sum.unchanged += json_count(r->body, "unchanged");
      tot.sum.replaced += json_count(r->body, "replaced");
      // The daemon's summary (docs/api.md): skipped = documents it refused, chunks = chunks written.
      tot.sum.rejected += json_count(r->body, "skipped");
      tot.sum.chunks_added += json_count(r->body, "chunks");
      for (const auto& d : batch) tot.sum.bytes += d.text.size();
    }
    batch.clear();
    batch_bytes = 0;
    return true;
  };
  size_t files_done = 0;
  for (const auto& f : *files) {
    ReadResult r = read_input_file(f.path);
    relabel_documents(f, &r);  // ids relative to the ingest root: no server paths shown to clients
    tot.skipped.insert(tot.skipped.end(), r.skipped.begin(), r.skipped.end());
    tot.notes.insert(tot.notes.end(), r.notes.begin(), r.notes.end());
    tot.empty_pages += r.empty_pages;
    for (auto& d : r.documents) {
      batch_bytes += d.text.size();
      batch.push_back(std::move(d));
      if (batch_bytes >= max_batch || batch.size() >= 512) {
        if (!flush()) return 1;
      }
    }
    done_bytes += f.bytes;
    ++files_done;
    progress.update(files_done, done_bytes, tot.sum.chunks_added);
  }
  if (!flush()) return 1;
  if (corpus) {
    Status st = corpus->save_index();
    if (!st.ok()) {
      std::fprintf(stderr, "ragctl ingest: saving the index: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  progress.update(files_done, done_bytes, tot.sum.chunks_added, true);

  double el = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto& s = tot.sum;
  size_t unsupported = 0, rejected_inputs = 0;
  for (const auto& k : tot.skipped) ++(k.kind == SkipKind::kUnsupported ? unsupported : rejected_inputs);
  std::printf("ingested %zu, unchanged %zu, replaced %zu, rejected %zu, skipped %zu (%zu rejected, %zu unsupported)\n",
              s.ingested, s.unchanged, s.replaced, s.rejected, tot.skipped.size(), rejected_inputs, unsupported);
  std::printf("chunks +%llu -%llu; %.2f MB of text in %.2f s (%.2f MB/s, %.0f chunks/s)\n",
              static_cast<unsigned long long>(s.chunks_added), static_cast<unsigned long long>(s.chunks_removed),
              static_cast<double>(s.bytes) / 1e6, el, el > 0 ? static_cast<double>(done_bytes) / 1e6 / el : 0.0,
              el > 0 ? static_cast<double>(s.chunks_added) / el : 0.0);
  if (tot.empty_pages > 0)
    std::printf("PDF pages without text, left out: %llu\n", static_cast<unsigned long long>(tot.empty_pages));
  if (corpus) {
    auto st = corpus->stats();
    std::printf("corpus: %llu documents, %llu chunks, index %s (%s), embedder %s\n",
                static_cast<unsigned long long>(st.documents), static_cast<unsigned long long>(st.chunks),
                st.index_spec.c_str(), st.index_trained ? "trained" : "staging, exact until trained",
                st.embedder.c_str());
  }
  // What was left out and why, grouped by reason: every rejected file (each is one the user meant
  // to ingest, up to 20 a reason), the first few of the rest.
  struct Group {
    size_t show = 3;
    std::vector<std::string> items;
  };
  std::map<std::string, Group> by_reason;
  for (const auto& k : tot.skipped) {
    std::string key = k.reason.substr(0, k.reason.find(" at byte"));
    key = key.substr(0, key.find(" ("));
    key = key.substr(0, key.find(": "));
    const bool unsup = k.kind == SkipKind::kUnsupported;
    Group& g = by_reason[(unsup ? "unsupported: " : "rejected: ") + key];
    if (!unsup) g.show = 20;
    g.items.push_back(k.path + ": " + k.reason);
  }
  for (const auto& k : s.problems) {
    Group& g = by_reason["rejected by the corpus: " + k.reason.substr(0, k.reason.find(" ("))];
    g.show = 20;
    g.items.push_back(k.path + ": " + k.reason);
  }
  for (const auto& n : tot.notes) by_reason["note: " + n.note.substr(0, n.note.find(" ("))].items.push_back(n.path + ": " + n.note);
  for (const auto& [reason, g] : by_reason) {
    std::printf("  %zu x %s\n", g.items.size(), reason.c_str());
    for (size_t i = 0; i < g.items.size() && i < g.show; ++i) std::printf("      %s\n", g.items[i].c_str());
    if (g.items.size() > g.show) std::printf("      ... and %zu more\n", g.items.size() - g.show);
  }
  const size_t refused = rejected_inputs + s.problems.size();
  if (refused > 0 || (unsupported > 0 && !a.skip_unsupported)) {
    std::string what;
    if (refused > 0) what = std::to_string(refused) + (refused == 1 ? " input rejected" : " inputs rejected");
    if (unsupported > 0 && !a.skip_unsupported)
      what += (what.empty() ? "" : ", ") + std::to_string(unsupported) +
              (unsupported == 1 ? " file of an unsupported format" : " files of unsupported formats") +
              " (--skip-unsupported accepts those)";
    std::fprintf(stderr, "ragctl ingest: %s; the rest is ingested (reasons above)\n", what.c_str());
    return kExitInputsLeftOut;
  }
  return 0;
}

Registration reg("ingest", "chunk, embed and index documents (.txt .md .html .jsonl .pdf .docx .odt .epub, manual pages, gzip of any; directories)",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<IngestArgs>();
                   sub.add_option("paths", a->paths, "files and directories to ingest")->required();
                   auto* data = sub.add_option("--data", a->data, "data directory (default $RAGD_DATA or ./data)");
                   sub.add_option("--url", a->url, "send documents to a running daemon instead (http://host:port)")
                       ->excludes(data);
                   sub.add_option("--model", a->model,
                                  "model directory whose tokenizer.json chunks the text (default $RAGD_MODEL or ./data/model)");
                   sub.add_option("--chunk-tokens", a->chunk_tokens, "tokens per chunk")->capture_default_str();
                   sub.add_option("--overlap", a->overlap, "tokens of overlap between chunks")->capture_default_str();
                   sub.add_option("--embedder", a->embedder, "hashing | termvec | model (default: the corpus's; a new corpus: termvec with models/ragd-termvec or $RAGD_TERMVEC_DIR, else hashing)");
                   sub.add_option("--dim", a->dim, "hashing embedder dimension")->capture_default_str();
                   sub.add_option("--embedder-model", a->embedder_model,
                                  "embedder directory for --embedder termvec | model (term vectors, encoder or decoder)");
                   sub.add_option("--embedder-pooling", a->embedder_pooling,
                                  "cls | mean | lasttoken (default: as the checkpoint's sentence-transformers files say)");
                   sub.add_option("--query-prefix", a->embedder_query_prefix,
                                  "instruction prefix of search queries (e.g. BGE's), recorded in the corpus");
                   sub.add_option("--document-prefix", a->embedder_document_prefix,
                                  "prefix of every passage (e.g. E5's \"passage: \"), recorded in the corpus");
                   sub.add_option("--index", a->index,
                                  "FAISS index: Flat, HNSW32, IVF1024,Flat, IVF1024,PQ32 (default: the corpus's, else Flat)");
                   sub.add_option("--batch-mb", a->batch_mb, "MB of text per durable batch")->capture_default_str();
                   sub.add_flag("-q,--quiet", a->quiet, "no progress output");
                   sub.add_flag("--skip-unsupported", a->skip_unsupported,
                                "files of formats ragd does not read (images, archives, unknown extensions) are "
                                "listed but do not make the exit status 3; rejected files (damaged, encrypted or "
                                "image-only PDF, invalid UTF-8, malformed JSONL) still do");
                   sub.footer(
                       "Formats by content, then extension: PDF (one document per page, id FILE#page=N), HTML, "
                       "Markdown, text, JSONL {id, title, text, url, metadata}.\n"
                       "Exit status: 0 every input ingested; 3 finished, but some input was rejected or of an "
                       "unsupported format (the rest is ingested; see the summary); 1 failure; 2 usage.");
                   return [a]() { return run_ingest(*a); };
                 });

}  // namespace
}  // namespace ragd::tools

#include "zip_xml.h"

#include <zip.h>

namespace ragd::retrieval {

Result<std::unique_ptr<ZipArchive>> ZipArchive::open(std::string_view bytes) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &ze);
  zip_t* za = src != nullptr ? zip_open_from_source(src, ZIP_RDONLY, &ze) : nullptr;
  if (za == nullptr) {
    if (src != nullptr) zip_source_free(src);
    std::string why = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    return Status::InvalidArgument("damaged ZIP container (" + why + ")");
  }
  zip_error_fini(&ze);
  return std::unique_ptr<ZipArchive>(new ZipArchive(za));
}

ZipArchive::~ZipArchive() { zip_discard(za_); }

bool ZipArchive::has(const std::string& name) const { return zip_name_locate(za_, name.c_str(), 0) >= 0; }

Result<std::string> ZipArchive::read(const std::string& name, uint64_t max_bytes) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(za_, name.c_str(), 0, &st) != 0) return Status::NotFound(name + " is missing");
  if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
    return Status::InvalidArgument(name + " is encrypted (a password-protected document)");
  auto too_large = [&](const std::string& size) {
    return Status::InvalidArgument(name + " is larger than max_file_bytes once decompressed (" + size + ")");
  };
  if ((st.valid & ZIP_STAT_SIZE) && st.size > max_bytes)
    return too_large(std::to_string(st.size) + " > " + std::to_string(max_bytes));
  zip_file_t* f = zip_fopen(za_, name.c_str(), 0);
  if (f == nullptr) return Status::InvalidArgument(name + ": " + zip_strerror(za_));
  std::string out;
  char buf[1 << 16];
  while (true) {
    const zip_int64_t n = zip_fread(f, buf, sizeof buf);
    if (n < 0) {
      std::string why = zip_file_strerror(f);
      zip_fclose(f);
      return Status::InvalidArgument("damaged ZIP entry " + name + " (" + why + ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      zip_fclose(f);
      return too_large("over " + std::to_string(max_bytes) + " bytes");
    }
  }
  zip_fclose(f);
  return out;
}

QName qname(const XML_Char* n) {
  std::string_view s(n);
  const size_t p = s.rfind(kXmlNsSep);
  if (p == std::string_view::npos) return {{}, s};
  return {s.substr(0, p), s.substr(p + 1)};
}

std::string_view attribute(const XML_Char** atts, std::string_view ns, std::string_view local) {
  for (size_t i = 0; atts[i] != nullptr; i += 2) {
    QName q = qname(atts[i]);
    if (q.ns == ns && q.local == local) return atts[i + 1];
  }
  return {};
}

}  // namespace ragd::retrieval

#include "tls/pem.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace sluice::tls {

bool read_pem_file(const std::string& path, std::string& out, std::string& error) {
  const std::string too_large = path + ": larger than 1 MiB (not a PEM certificate or key)";
  // Non-blocking, so that opening a FIFO does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    error = path + ": cannot open file (" + std::strerror(errno) + ")";
    return false;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error = path + ": cannot read file (" + std::strerror(errno) + ")";
    return false;
  }
  if (S_ISDIR(st.st_mode)) return (error = path + ": is a directory"), false;
  if (!S_ISREG(st.st_mode)) return (error = path + ": not a regular file"), false;
  if (static_cast<std::uint64_t>(st.st_size) > kMaxPemBytes) return (error = too_large), false;
  out.clear();
  char chunk[16384];
  for (;;) {  // bounded again: the file may grow while it is read
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n == 0) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = path + ": cannot read file (" + std::strerror(errno) + ")";
      return false;
    }
    out.append(chunk, static_cast<std::size_t>(n));
    if (out.size() > kMaxPemBytes) return (error = too_large), false;
  }
}

Bio memory_bio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

int no_passphrase(char*, int, int, void*) { return 0; }

std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += reason ? reason : "error " + std::to_string(e);
  }
  return out.empty() ? "unknown error" : out;
}

bool only_end_of_pem() {
  const unsigned long e = ERR_peek_last_error();
  if (e == 0 || (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
    ERR_clear_error();
    return true;
  }
  return false;
}

bool add_chain(SSL_CTX* ctx, BIO* bio) {
  while (X509* ca = PEM_read_bio_X509(bio, nullptr, no_passphrase, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
      X509_free(ca);
      return false;
    }
  }
  return true;
}

}  // namespace sluice::tls

// What both ends of sluice's TLS share: the listener's context
// (proxy/tls_context.h) and the contexts towards the model servers
// (datalayer/upstream_tls.h) read their certificates, keys and CA bundles
// through these. A PEM file is read whole with a bound before OpenSSL sees
// any of it; OpenSSL's objects are owned by the unique_ptrs below.
//
// Any thread. Nothing here throws or keeps state of its own (OpenSSL's
// error queue is the calling thread's).
#pragma once

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstddef>
#include <memory>
#include <string>

namespace sluice::tls {

// A PEM file larger than this is not a certificate chain, a CA bundle or a key.
inline constexpr std::size_t kMaxPemBytes = 1u << 20;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509InfoStackFree {
  void operator()(STACK_OF(X509_INFO) * s) const { sk_X509_INFO_pop_free(s, X509_INFO_free); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509InfoStack = std::unique_ptr<STACK_OF(X509_INFO), X509InfoStackFree>;

// `path` whole into `out` if it is a regular file of at most kMaxPemBytes: a
// directory, a pipe, a device or a larger file is refused without reading
// it (a FIFO without a writer does not block the open). Else false, and
// `error` is "PATH: why".
bool read_pem_file(const std::string& path, std::string& out, std::string& error);

// A read-only memory BIO over `text`, which must outlive it.
Bio memory_bio(const std::string& text);

// The passphrase callback for OpenSSL's PEM readers: there is none, so an
// encrypted key fails to load instead of prompting on the terminal.
int no_passphrase(char*, int, int, void*);

// This thread's OpenSSL error queue, drained, as "reason; reason" ("unknown
// error" when it is empty).
std::string openssl_errors();

// True, and the queue cleared, if it holds nothing or only the end of the
// PEM text (PEM_R_NO_START_LINE, what reading past the last block says).
bool only_end_of_pem();

// The certificates left in `bio` (after the leaf) added to `ctx`'s chain;
// false if one is not usable (the queue says why). The end of the text is
// not an error: see only_end_of_pem().
bool add_chain(SSL_CTX* ctx, BIO* bio);

}  // namespace sluice::tls

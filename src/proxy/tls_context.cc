#include "proxy/tls_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <ctime>
#include <string_view>

#include "tls/pem.h"

namespace sluice::proxy {
namespace {

// The longest client-certificate name handed to the auth layer.
constexpr std::size_t kMaxPeerNameBytes = 1024;

using tls::Bio;
using tls::Cert;
using tls::memory_bio;
using tls::no_passphrase;
using tls::only_end_of_pem;
using tls::openssl_errors;
using tls::Pkey;

// ALPN: http/1.1 when the client offers it; a client that offers only
// other protocols (h2) gets none, and HTTP/1.1 all the same.
int select_alpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
                unsigned int in_len, void*) {
  constexpr std::string_view kHttp11 = "http/1.1";
  for (unsigned int i = 0; i < in_len;) {
    const unsigned int len = in[i];
    if (i + 1 + len > in_len) break;
    if (std::string_view(reinterpret_cast<const char*>(in + i + 1), len) == kHttp11) {
      *out = in + i + 1;
      *out_len = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

std::string serial_hex(const X509* x) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr);
  if (!bn) return "";
  char* hex = BN_bn2hex(bn);
  std::string out = hex ? hex : "";
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

std::int64_t unix_time(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<std::int64_t>(::timegm(&tm));
}

}  // namespace

FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return {};
  return FileStamp{true, static_cast<std::uint64_t>(st.st_dev),
                   static_cast<std::uint64_t>(st.st_ino), static_cast<std::int64_t>(st.st_size),
                   static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

TlsFileStamps stamps_of(const config::TlsOptions& o) {
  return {stamp_of(o.certificate_file), stamp_of(o.key_file), stamp_of(o.client_ca_file)};
}

TlsServerContext::TlsServerContext() : ssl_(boost::asio::ssl::context::tls_server) {}

namespace {

// The certificate and the chain after it: the leaf's subject, serial and
// validity noted.
bool load_chain(SSL_CTX* h, const config::TlsOptions& o, std::string& subject, std::string& serial,
                std::int64_t& not_after, std::string& error) {
  const std::string field = "server.tls.certificateFile: ";
  std::string pem;
  if (!tls::read_pem_file(o.certificate_file, pem, error)) return (error = field + error), false;
  Bio bio = memory_bio(pem);
  Cert leaf(PEM_read_bio_X509_AUX(bio.get(), nullptr, no_passphrase, nullptr));
  if (!leaf) {
    error = field + o.certificate_file + ": no PEM certificate in it (" + openssl_errors() + ")";
    return false;
  }
  if (SSL_CTX_use_certificate(h, leaf.get()) != 1) {
    error = field + o.certificate_file + ": certificate not usable (" + openssl_errors() + ")";
    return false;
  }
  char name[512];
  subject = X509_NAME_oneline(X509_get_subject_name(leaf.get()), name, sizeof name);
  serial = serial_hex(leaf.get());
  not_after = unix_time(X509_get0_notAfter(leaf.get()));
  if (!tls::add_chain(h, bio.get())) {
    error =
        field + o.certificate_file + ": chain certificate not usable (" + openssl_errors() + ")";
    return false;
  }
  if (!only_end_of_pem()) {
    error = field + o.certificate_file + ": " + openssl_errors();
    return false;
  }
  return true;
}

bool load_key(SSL_CTX* h, const config::TlsOptions& o, std::string& error) {
  const std::string field = "server.tls.keyFile: ";
  std::string pem;
  if (!tls::read_pem_file(o.key_file, pem, error)) return (error = field + error), false;
  Bio bio = memory_bio(pem);
  Pkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!key) {
    error =
        field + o.key_file + ": no unencrypted PEM private key in it (" + openssl_errors() + ")";
    return false;
  }
  if (SSL_CTX_use_PrivateKey(h, key.get()) != 1 || SSL_CTX_check_private_key(h) != 1) {
    error = field + o.key_file + ": does not match the certificate in " + o.certificate_file +
            " (" + openssl_errors() + ")";
    return false;
  }
  return true;
}

// Client certificates: requested and verified against the CAs of
// clientCaFile (their names sent in the request), required if so set.
bool load_client_cas(SSL_CTX* h, const config::TlsOptions& o, std::string& error) {
  const std::string field = "server.tls.clientCaFile: ";
  std::string pem;
  if (!tls::read_pem_file(o.client_ca_file, pem, error)) return (error = field + error), false;
  Bio bio = memory_bio(pem);
  X509_STORE* store = SSL_CTX_get_cert_store(h);
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
  int count = 0;
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr)) {
    Cert owned(ca);
    X509_STORE_add_cert(store, ca);
    if (X509_NAME* n = X509_NAME_dup(X509_get_subject_name(ca))) sk_X509_NAME_push(names, n);
    ++count;
  }
  SSL_CTX_set_client_CA_list(h, names);  // owns `names` from here
  if (!only_end_of_pem() || count == 0) {
    error = field + o.client_ca_file + ": no PEM certificate in it (" + openssl_errors() + ")";
    return false;
  }
  SSL_CTX_set_verify(
      h, SSL_VERIFY_PEER | (o.require_client_certificate ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
      nullptr);
  return true;
}

// Versions, ciphers, ALPN and the rest that does not come from a file.
bool set_protocol(SSL_CTX* h, const config::TlsOptions& o, std::string& error) {
  SSL_CTX_set_min_proto_version(h, o.min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION);
  // No compression (CRIME), no renegotiation (a client could make the
  // server redo the expensive half of a handshake at will).
  SSL_CTX_set_options(h, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (!o.ciphers.empty() && SSL_CTX_set_cipher_list(h, o.ciphers.c_str()) != 1) {
    error =
        "server.tls.ciphers: no usable cipher in '" + o.ciphers + "' (" + openssl_errors() + ")";
    return false;
  }
  if (!o.cipher_suites.empty() && SSL_CTX_set_ciphersuites(h, o.cipher_suites.c_str()) != 1) {
    error = "server.tls.cipherSuites: no usable suite in '" + o.cipher_suites + "' (" +
            openssl_errors() + ")";
    return false;
  }
  // Sessions resumed from this context's cache or tickets (a verified
  // client certificate is kept with its session).
  static constexpr unsigned char kSessionContext[] = "sluice";
  SSL_CTX_set_session_id_context(h, kSessionContext, sizeof kSessionContext - 1);
  SSL_CTX_set_alpn_select_cb(h, select_alpn, nullptr);
  return true;
}

}  // namespace

std::shared_ptr<TlsServerContext> build_tls_context(const config::TlsOptions& o,
                                                    std::string& error) {
  ERR_clear_error();
  std::shared_ptr<TlsServerContext> c;
  try {
    c = std::make_shared<TlsServerContext>();
  } catch (const std::exception& e) {
    error = std::string("server.tls: cannot make an OpenSSL context (") + e.what() + ")";
    return nullptr;
  }
  c->stamps_ = stamps_of(o);  // before reading: a change while reading is seen next time
  SSL_CTX* h = c->ssl_.native_handle();
  const bool ok = set_protocol(h, o, error) &&
                  load_chain(h, o, c->subject_, c->serial_, c->not_after_, error) &&
                  load_key(h, o, error) &&
                  (o.client_ca_file.empty() || load_client_cas(h, o, error));
  ERR_clear_error();
  return ok ? c : nullptr;
}

namespace {

// A name fit to hand on: 1 to kMaxPeerNameBytes bytes, no control bytes.
std::string clean_name(const unsigned char* data, int length) {
  if (!data || length <= 0 || static_cast<std::size_t>(length) > kMaxPeerNameBytes) return "";
  std::string out(reinterpret_cast<const char*>(data), static_cast<std::size_t>(length));
  for (unsigned char ch : out)
    if (ch < 0x20 || ch == 0x7f) return "";
  return out;
}

// The first subject alternative name of `type` (GEN_URI, GEN_DNS,
// GEN_EMAIL); `found` says whether there was one (a bad one gives "").
std::string first_san(const GENERAL_NAMES* sans, int type, bool& found) {
  for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
    if (g->type != type) continue;
    found = true;
    return clean_name(ASN1_STRING_get0_data(g->d.ia5), ASN1_STRING_length(g->d.ia5));
  }
  return "";
}

}  // namespace

std::string verified_peer_name(SSL* ssl) {
  X509* peer = SSL_get0_peer_certificate(ssl);
  if (!peer || SSL_get_verify_result(ssl) != X509_V_OK) return "";
  if (auto* sans = static_cast<GENERAL_NAMES*>(
          X509_get_ext_d2i(peer, NID_subject_alt_name, nullptr, nullptr))) {
    bool found = false;
    std::string name;
    for (int type : {GEN_URI, GEN_DNS, GEN_EMAIL}) {
      name = first_san(sans, type, found);
      if (found) break;
    }
    GENERAL_NAMES_free(sans);
    if (found) return name;
  }
  X509_NAME* subject = X509_get_subject_name(peer);
  const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at < 0) return "";
  unsigned char* utf8 = nullptr;
  const int n =
      ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at)));
  std::string name = n >= 0 ? clean_name(utf8, n) : "";
  OPENSSL_free(utf8);
  return name;
}

TlsCredentials::TlsCredentials(const config::TlsOptions& o) : options_(o) {
  std::string error;
  current_ = build_tls_context(o, error);
  if (!current_) throw config::ConfigError(error);
  attempted_ = current_->stamps();
}

std::shared_ptr<TlsServerContext> TlsCredentials::current() const {
  std::lock_guard lock(current_mu_);
  return current_;
}

void TlsCredentials::install(std::shared_ptr<TlsServerContext> context,
                             const config::TlsOptions& o) {
  std::lock_guard build(build_mu_);
  options_ = o;
  attempted_ = context->stamps();
  {
    std::lock_guard lock(current_mu_);
    current_ = std::move(context);
  }
  reloads_.fetch_add(1, std::memory_order_relaxed);
}

TlsCredentials::Check TlsCredentials::check_files(std::string& message) {
  std::lock_guard build(build_mu_);
  const TlsFileStamps now = stamps_of(options_);
  if (now == attempted_) return Check::kUnchanged;
  attempted_ = now;
  std::string error;
  auto next = build_tls_context(options_, error);
  if (!next) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    message = error;
    return Check::kFailed;
  }
  attempted_ = next->stamps();
  {
    std::lock_guard lock(current_mu_);
    current_ = next;
  }
  reloads_.fetch_add(1, std::memory_order_relaxed);
  message = describe(*next);
  return Check::kReloaded;
}

std::string describe(const TlsServerContext& c) {
  char until[32] = "?";
  const std::time_t t = static_cast<std::time_t>(c.not_after());
  std::tm tm{};
  if (::gmtime_r(&t, &tm)) std::strftime(until, sizeof until, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return "certificate " + c.subject() + " serial " + c.serial() + ", valid until " + until;
}

}  // namespace sluice::proxy

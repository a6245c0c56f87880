#include "datalayer/upstream_tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

#include "tls/pem.h"

namespace sluice::datalayer {

namespace {

using tls::Bio;
using tls::memory_bio;
using tls::no_passphrase;
using tls::openssl_errors;

// `path` whole: a regular file of at most tls::kMaxPemBytes (a pipe, a
// device or a huge file is refused before OpenSSL sees any of it).
bool read_pem(const std::string& path, const std::string& field, std::string& text,
              std::string& error) {
  if (tls::read_pem_file(path, text, error)) return true;
  error = field + ": " + error;
  return false;
}

// The CA bundle's certificates (and CRLs) into the context's store.
bool load_cas(SSL_CTX* ctx, const std::string& file, const std::string& field, std::string& error) {
  std::string pem;
  if (!read_pem(file, field, pem, error)) return false;
  Bio bio = memory_bio(pem);
  tls::X509InfoStack infos(PEM_X509_INFO_read_bio(bio.get(), nullptr, no_passphrase, nullptr));
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int certificates = 0;
  for (int i = 0; infos && i < sk_X509_INFO_num(infos.get()); ++i) {
    const X509_INFO* info = sk_X509_INFO_value(infos.get(), i);
    if (info->x509 && X509_STORE_add_cert(store, info->x509) == 1) ++certificates;
    if (info->crl) X509_STORE_add_crl(store, info->crl);
  }
  if (!infos || certificates == 0) {
    error = field + " " + file + ": no PEM certificate in it (" + openssl_errors() + ")";
    return false;
  }
  ERR_clear_error();
  return true;
}

// The client certificate, the chain after it, and its key (which must match).
bool load_client_certificate(SSL_CTX* ctx, const config::UpstreamTlsOptions& o,
                             const std::string& where, std::string& error) {
  const std::string field = where + ".certificateFile";
  std::string pem;
  if (!read_pem(o.certificate_file, field, pem, error)) return false;
  Bio bio = memory_bio(pem);
  tls::Cert leaf(PEM_read_bio_X509_AUX(bio.get(), nullptr, no_passphrase, nullptr));
  if (!leaf || SSL_CTX_use_certificate(ctx, leaf.get()) != 1) {
    error = field + " " + o.certificate_file + ": " + openssl_errors();
    return false;
  }
  if (!tls::add_chain(ctx, bio.get())) {
    error = field + " " + o.certificate_file + ": " + openssl_errors();
    return false;
  }
  ERR_clear_error();  // the end of the file reads as "no start line"
  const std::string key_field = where + ".keyFile";
  if (!read_pem(o.key_file, key_field, pem, error)) return false;
  bio = memory_bio(pem);
  tls::Pkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!key || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    error = key_field + " " + o.key_file + ": " + openssl_errors();
    return false;
  }
  return true;
}

std::shared_ptr<const UpstreamTls> build_one(const config::UpstreamTlsOptions& o,
                                             const std::string& where, std::string& error) {
  if (!o.enabled) return nullptr;
  auto t = std::make_shared<UpstreamTls>();
  t->server_name = o.server_name;
  t->verify = !o.insecure_skip_verify;
  t->context = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client);
  SSL_CTX* ctx = t->context->native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  ERR_clear_error();
  if (o.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      error = where + ".caFile (the system's default paths): " + openssl_errors();
      return nullptr;
    }
  } else if (!load_cas(ctx, o.ca_file, where + ".caFile", error)) {
    return nullptr;
  }
  if (!o.certificate_file.empty() && !load_client_certificate(ctx, o, where, error)) return nullptr;
  SSL_CTX_set_verify(ctx, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return t;
}

}  // namespace

std::shared_ptr<const UpstreamTlsSet> build_upstream_tls(const config::Config& c,
                                                         std::string& error) {
  auto set = std::make_shared<UpstreamTlsSet>();
  set->pool = build_one(c.server.upstream_tls, c.source + ": server.upstreamTls", error);
  if (!error.empty()) return nullptr;
  for (const auto& e : c.endpoints) {
    if (!e.tls) continue;
    set->by_address[e.address] =
        build_one(*e.tls, c.source + ": endpoints." + e.address + ".tls", error);
    if (!error.empty()) return nullptr;
  }
  return set;
}

bool prepare_upstream_session(SSL* ssl, const UpstreamTls& tls, const std::string& name) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(name, ec);
  if (ec) {  // a host name: SNI, and the certificate must name it
    if (SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) return false;
    if (tls.verify && SSL_set1_host(ssl, name.c_str()) != 1) return false;
  } else if (tls.verify && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) != 1) {
    return false;
  }
  return true;
}

}  // namespace sluice::datalayer

#include "proxy/upstream_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

namespace sluice::proxy {

namespace {

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
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
  if (o.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx) != 1
                        : SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
    error = where + ".caFile " + (o.ca_file.empty() ? "(the system's default paths)" : o.ca_file) +
            ": " + openssl_error();
    return nullptr;
  }
  if (!o.certificate_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, o.certificate_file.c_str()) != 1) {
      error = where + ".certificateFile " + o.certificate_file + ": " + openssl_error();
      return nullptr;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      error = where + ".keyFile " + o.key_file + ": " + openssl_error();
      return nullptr;
    }
  }
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

}  // namespace sluice::proxy

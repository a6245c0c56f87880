#include "tools/load/tls_client.h"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <stdexcept>

namespace sluice::load {

namespace ssl = boost::asio::ssl;

namespace {

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  const char* reason = ERR_reason_error_string(e);
  return reason ? reason : "error " + std::to_string(e);
}

}  // namespace

std::shared_ptr<ssl::context> make_tls_client_context(const std::string& ca_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX* h = ctx->native_handle();
  SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION);
  SSL_CTX_set_verify(h, SSL_VERIFY_PEER, nullptr);
  // No session is ever offered again: tickets the server sends are dropped.
  SSL_CTX_set_session_cache_mode(h, SSL_SESS_CACHE_OFF);
  if (ca_file.empty() ? SSL_CTX_set_default_verify_paths(h) != 1
                      : SSL_CTX_load_verify_locations(h, ca_file.c_str(), nullptr) != 1)
    throw std::runtime_error("cannot load the CA bundle " +
                             (ca_file.empty() ? std::string("(system default)") : ca_file) + ": " +
                             openssl_error());
  static constexpr unsigned char kAlpn[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(h, kAlpn, sizeof kAlpn - 1);
  return ctx;
}

bool prepare_tls_session(SSL* ssl, const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  if (!ec) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set1_host(ssl, host.c_str()) == 1 && SSL_set_tlsext_host_name(ssl, host.c_str()) == 1;
}

}  // namespace sluice::load

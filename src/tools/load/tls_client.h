// TLS towards the target for sluice-load (--target https://HOST:PORT): the
// client context, the server verified against --ca-file (or the system's
// CAs), and each connection's name check. Every connection is a fresh
// session (a full handshake): the driver keeps no session cache. Used on
// the driver's one thread.
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

namespace sluice::load {

// TLS 1.2 or later, the server's certificate verified against the PEM
// bundle `ca_file` ("": the system's default paths), ALPN http/1.1. Throws
// std::runtime_error naming the file if it cannot be read.
std::shared_ptr<boost::asio::ssl::context> make_tls_client_context(const std::string& ca_file);

// Sets a new connection's session up for `host`: an IP address is checked
// against the certificate's IP addresses; a name is sent as SNI and checked
// against its names. False if OpenSSL refuses the name.
bool prepare_tls_session(SSL* ssl, const std::string& host);

}  // namespace sluice::load

// TLS towards the model servers (server.upstreamTls, endpoints[].tls): the
// client contexts built from the config's files, one per distinct setting,
// and which one an endpoint's connections use. Every connection sluice makes
// to an endpoint uses them: the proxied requests' (proxy/), the metrics
// scrapes and the model catalogue's polls (here). Built with the request
// policy (startup and every reload); immutable once built. A connection
// holds the context it started with, so a reload changes only new
// connections (pooled ones keep theirs).
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <string>

#include "config/config.h"

namespace sluice::datalayer {

// One setting's client context.
struct UpstreamTls {
  std::shared_ptr<boost::asio::ssl::context> context;
  std::string server_name;  // "": the endpoint's host
  bool verify = true;       // !insecureSkipVerify
  // The name a session towards an endpoint on `host` checks (and sends as
  // SNI): serverName, else the host.
  const std::string& name_for(const std::string& host) const {
    return server_name.empty() ? host : server_name;
  }
};

struct UpstreamTlsSet {
  std::shared_ptr<const UpstreamTls> pool;  // null: plain HTTP
  // An endpoint's own tls: (null: enabled: false, plain HTTP).
  std::map<std::string, std::shared_ptr<const UpstreamTls>> by_address;
  // What `address`'s new connections use; null: plain HTTP.
  std::shared_ptr<const UpstreamTls> for_address(const std::string& address) const {
    auto it = by_address.find(address);
    return it == by_address.end() ? pool : it->second;
  }
};

// Reads the files c's upstream TLS settings name (the CA bundle, or the
// system's default paths; a client certificate chain and its key), each a
// regular file of at most tls::kMaxPemBytes (tls/pem.h), and builds the
// contexts: TLS 1.2 at least, the server verified unless
// insecureSkipVerify. Null with `error` naming the setting and the file
// (a file too large, not a regular one, or not PEM). Never throws; not on
// an I/O thread (it reads files).
std::shared_ptr<const UpstreamTlsSet> build_upstream_tls(const config::Config& c,
                                                         std::string& error);

// Sets `ssl` up for a connection to `name` (a host name: SNI and the
// certificate's name checked; an IP address: the certificate's IP
// checked). False if OpenSSL refuses the name.
bool prepare_upstream_session(SSL* ssl, const UpstreamTls& tls, const std::string& name);

}  // namespace sluice::datalayer

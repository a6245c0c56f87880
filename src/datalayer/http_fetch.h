// One asynchronous HTTP or HTTPS GET on an io_context (issue 32: a JWKS
// fetched from a URL; the model catalogue's polls). Everything it does —
// resolving the name, connecting, the TLS handshake, the request, the
// response — is an asynchronous operation on that context's thread, bounded
// as a whole by one timeout, and every read is bounded (the header, the
// body). HTTPS verifies the peer against a CA bundle (or the system's) and
// checks the host name or IP address against the certificate, or does what
// a model server's upstream TLS setting says (the model catalogue's polls);
// TLS 1.2 at least. Redirects are not followed. The small client of an
// occasional fetch, not the data plane.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace sluice::datalayer {

struct UpstreamTls;

struct FetchOptions {
  // The whole fetch: resolve, connect, handshake, request, response.
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);
  std::size_t max_body_bytes = 1u << 20;  // larger: error "too large", read no further
  std::size_t max_header_bytes = 16u << 10;
  std::string ca_file;  // https: verify against this PEM bundle; "": the system's default paths
  // https to a model server: this client context and its settings
  // (datalayer/upstream_tls.h: verification, serverName, a client
  // certificate) instead of ca_file's.
  std::shared_ptr<const UpstreamTls> tls;
  // Sent as the Authorization field when set ("Bearer <token>"); never
  // appears in a result's error.
  std::string authorization;
};

struct FetchResult {
  bool ok = false;  // a complete 200 answer
  int status = 0;   // the HTTP status, if a response head came
  std::string body;
  std::string error;  // !ok: why, for a log line (never contains the body, nor the URL's query)
};

// One GET of `url` ("http://host[:port]/path" or "https://..."; host a
// name, IPv4 or [IPv6]) on `ioc`'s thread; `done` runs there exactly once,
// never inside http_get itself (http_get may be called from any thread).
// Nothing blocks the thread: names are resolved asynchronously. A 3xx is an
// error naming its Location. If `ioc` is stopped for good or destroyed
// before the fetch ends, `done` is destroyed without being called.
void http_get(boost::asio::io_context& ioc, const std::string& url, const FetchOptions& options,
              std::function<void(FetchResult)> done);

// A URL split into what a GET needs. `host` is lower-cased; an IPv6
// literal is kept without its brackets ("::1"). `target` is the path and
// query ("/" when the URL has neither).
struct Url {
  bool https = false;
  std::string host;
  std::uint16_t port = 0;  // 80 or 443 when the URL gives none
  std::string target = "/";
};

// Parses an http:// or https:// URL (scheme in any case). False for
// anything else: other schemes, userinfo ("user@host"), a fragment, a
// port that is empty, 0 or over 65535, spaces, control or non-ASCII
// bytes, an empty or malformed host.
bool parse_url(std::string_view url, Url& out);

}  // namespace sluice::datalayer

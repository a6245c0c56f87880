#include "config/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "config/auth_config.h"
#include "config/flow_control_config.h"
#include "config/llmd_document.h"
#include "config/llmd_plugins.h"
#include "config/quota_config.h"
#include "config/reader.h"
#include "config/units.h"
#include "sluice/extensions.h"

namespace sluice::config {
namespace {

using namespace detail;

// yaml-cpp keeps every entry of a mapping whose key repeats, and a lookup
// finds the first: a second `server:` or `listen:` would be dropped without a
// word. So the whole document is checked here, once, before any section is
// read: the sections read through Fields, and just as well the maps read
// otherwise (labels, plugin parameters) or passed through (parser, data). A
// key that is not a plain value (a list, a mapping, null) is refused too:
// no config field has one, and Fields would throw a YAML exception reading it.
// Aliases share nodes and can even form a cycle, so each collection is walked
// once; yaml-cpp bounds the nesting depth when it parses.
void check_keys(const std::string& source, const YAML::Node& node, const std::string& path,
                std::set<std::pair<int, int>>& walked) {
  if (!node.IsMap() && !node.IsSequence()) return;
  // No two collections of one type start at the same place in the text:
  // (position, type) identifies a node, whatever aliases point at it.
  if (!walked.insert({node.Mark().pos, static_cast<int>(node.Type())}).second) return;
  if (node.IsSequence()) {
    std::size_t i = 0;
    for (const auto& item : node)
      check_keys(source, item, path + "[" + std::to_string(i++) + "]", walked);
    return;
  }
  std::map<std::string, int> first_line;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      fail(source, kv.first, path, "a key must be a plain value, not a list, mapping or null");
    const std::string& key = kv.first.Scalar();
    const std::string child = path.empty() ? key : path + "." + key;
    auto [it, fresh] = first_line.emplace(key, kv.first.Mark().line + 1);
    if (!fresh)
      fail(source, kv.first, child,
           "duplicate key (first at line " + std::to_string(it->second) + ")");
    check_keys(source, kv.second, child, walked);
  }
}

void reject_duplicate_keys(const std::string& source, const YAML::Node& root) {
  std::set<std::pair<int, int>> walked;
  check_keys(source, root, "", walked);
}

// How long a pipe or device named as the config file gets to reach its end.
constexpr std::chrono::seconds kStreamReadDeadline{5};

}  // namespace

// The contents of `path`, at most `max_bytes`: a larger file is refused
// after reading one byte more (or at once, when its size says so), so that
// /dev/zero or a huge file never allocates without bound. With
// `allow_streams`, a pipe or device is read too (--config <(...)), but must
// end within kStreamReadDeadline: a FIFO whose writer never writes nor
// closes fails instead of hanging.
std::string detail::read_bounded(const std::string& path, bool allow_streams,
                                 std::size_t max_bytes) {
  const std::string too_large =
      path + ": larger than " +
      (max_bytes % (1u << 20) == 0 ? std::to_string(max_bytes >> 20) + " MiB"
                                   : std::to_string(max_bytes) + " bytes");
  auto error = [&](const char* what) {
    return ConfigError(path + ": " + what + " (" + std::strerror(errno) + ")");
  };
  // Non-blocking, so that opening a FIFO does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw error("cannot open file");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw error("cannot read file");
  if (S_ISDIR(st.st_mode)) throw ConfigError(path + ": is a directory");
  const bool regular = S_ISREG(st.st_mode);
  if (!regular && !allow_streams)
    throw ConfigError(path + ": not a regular file (a pipe or a device cannot be watched)");
  if (regular && static_cast<std::uint64_t>(st.st_size) > max_bytes) throw ConfigError(too_large);
  std::string text;
  // One allocation: the file's size (it may still grow), or the limit for a
  // stream (its pages are touched only as bytes arrive).
  text.reserve(regular ? static_cast<std::size_t>(st.st_size) + 1 : max_bytes + 1);
  const auto deadline = std::chrono::steady_clock::now() + kStreamReadDeadline;
  char chunk[16384];
  for (;;) {
    if (!regular) {
      // Wait for bytes or the end first: a FIFO nobody has opened for
      // writing yet reads as empty, but polls as not ready (Linux reports
      // POLLHUP only once a writer has come and gone).
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) throw error("cannot read file");
      if (ready == 0)
        throw ConfigError(path + ": no end of file within " +
                          std::to_string(kStreamReadDeadline.count()) + " s");
    }
    const std::size_t want = std::min(sizeof chunk, max_bytes + 1 - text.size());
    const ssize_t n = ::read(fd, chunk, want);
    if (n > 0) {
      text.append(chunk, static_cast<std::size_t>(n));
      if (text.size() > max_bytes) throw ConfigError(too_large);
    } else if (n == 0) {
      return text;
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      throw error("cannot read file");
    }
  }
}

namespace {

// server: where it listens, its I/O threads and its dispatcher.
void read_server_threads(const Reader& r, Fields& f, ServerOptions& s) {
  if (auto n = f.take("listen")) {
    // "" turns the plain listener off (read_server checks that tls is set).
    s.listen = r.scalar(n, f.child("listen")).empty() ? "" : r.host_port(n, f.child("listen"));
  }
  if (auto n = f.take("adminListen")) s.admin_listen = r.host_port(n, f.child("adminListen"));
  if (auto n = f.take("threads")) {
    auto v = r.integer(n, f.child("threads"));
    if (v < 0 || v > 256) fail(r.source, n, f.child("threads"), "must be between 0 and 256");
    s.threads = static_cast<int>(v);
  }
  if (auto n = f.take("dispatcher")) {
    s.dispatcher = r.string(n, f.child("dispatcher"));
    if (s.dispatcher != "auto" && s.dispatcher != "thread" && s.dispatcher != "inline")
      fail(r.source, n, f.child("dispatcher"), "must be auto, thread or inline");
  }
}

// server: the sizes and counts it accepts (bodies, headers, ids,
// connections).
void read_server_limits(const Reader& r, Fields& f, ServerOptions& s) {
  if (auto n = f.take("maxBodyBytes")) {
    s.max_body_bytes = r.quantity(n, f.child("maxBodyBytes"));
    if (s.max_body_bytes == 0)
      fail(r.source, n, f.child("maxBodyBytes"), "must be greater than zero");
  }
  if (auto n = f.take("maxBufferedBodyBytes")) {
    s.max_buffered_body_bytes = r.quantity(n, f.child("maxBufferedBodyBytes"));
    if (s.max_buffered_body_bytes < s.max_body_bytes)
      fail(r.source, n, f.child("maxBufferedBodyBytes"),
           "must be at least maxBodyBytes (" + std::to_string(s.max_body_bytes) + ")");
  }
  if (auto n = f.take("maxHeaderBytes")) {
    auto v = r.quantity(n, f.child("maxHeaderBytes"));
    if (v < 1024 || v > (1u << 20))
      fail(r.source, n, f.child("maxHeaderBytes"), "must be between 1Ki and 1Mi");
    s.max_header_bytes = static_cast<std::uint32_t>(v);
  }
  if (auto n = f.take("sseEventHoldBytes")) {
    auto v = r.quantity(n, f.child("sseEventHoldBytes"));
    if (v > (16u << 20)) fail(r.source, n, f.child("sseEventHoldBytes"), "must be at most 16Mi");
    s.sse_event_hold_bytes = static_cast<std::uint32_t>(v);
  }
  if (auto n = f.take("maxFairnessIdBytes")) {
    auto v = r.integer(n, f.child("maxFairnessIdBytes"));
    if (v < 1 || v > 1024)
      fail(r.source, n, f.child("maxFairnessIdBytes"), "must be between 1 and 1024");
    s.max_fairness_id_bytes = static_cast<std::uint32_t>(v);
  }
  if (auto n = f.take("maxConnections")) {
    s.max_connections = r.quantity(n, f.child("maxConnections"));
    if (s.max_connections == 0 || s.max_connections > 10000000)
      fail(r.source, n, f.child("maxConnections"), "must be between 1 and 10000000");
  }
  if (auto n = f.take("adminMaxConnections")) {
    s.admin_max_connections = r.quantity(n, f.child("adminMaxConnections"));
    if (s.admin_max_connections == 0 || s.admin_max_connections > 100000)
      fail(r.source, n, f.child("adminMaxConnections"), "must be between 1 and 100000");
  }
  if (auto n = f.take("maxModelBytes")) {
    auto v = r.integer(n, f.child("maxModelBytes"));
    if (v < 1 || v > 4096)
      fail(r.source, n, f.child("maxModelBytes"), "must be between 1 and 4096");
    s.max_model_bytes = static_cast<std::uint32_t>(v);
  }
}

// server: its timeouts and intervals, each greater than zero.
void read_server_timeouts(const Reader& r, Fields& f, ServerOptions& s) {
  struct {
    const char* key;
    nanoseconds* field;
  } durations[] = {
      {"headerReadTimeout", &s.header_read_timeout},
      {"bodyReadTimeout", &s.body_read_timeout},
      {"keepAliveIdleTimeout", &s.keep_alive_idle_timeout},
      {"clientWriteTimeout", &s.client_write_timeout},
      {"upstreamConnectTimeout", &s.upstream_connect_timeout},
      {"upstreamIdleTimeout", &s.upstream_idle_timeout},
      {"upstreamPoolIdleTimeout", &s.upstream_pool_idle_timeout},
      {"endpointDownBackoff", &s.endpoint_down_backoff},
      {"shutdownGracePeriod", &s.shutdown_grace_period},
      {"shutdownQueueDeadline", &s.shutdown_queue_deadline},
      {"metricsRefreshInterval", &s.metrics_refresh_interval},
      {"metricsTimeout", &s.metrics_timeout},
      {"endpointsFilePollInterval", &s.endpoints_file_poll_interval},
  };
  for (auto& d : durations) {
    if (auto n = f.take(d.key))
      *d.field = positive(r, n, f.child(d.key), r.duration(n, f.child(d.key)));
  }
}

// server: DNS discovery's interval, timeout and servers (at most 3,
// IPv4:PORT).
void read_server_dns(const Reader& r, Fields& f, ServerOptions& s) {
  if (auto n = f.take("dnsRefreshInterval"))
    s.dns_refresh_interval =
        positive(r, n, f.child("dnsRefreshInterval"), r.duration(n, f.child("dnsRefreshInterval")));
  if (auto n = f.take("dnsTimeout")) {
    s.dns_timeout = positive(r, n, f.child("dnsTimeout"), r.duration(n, f.child("dnsTimeout")));
    if (s.dns_timeout > 30s) fail(r.source, n, f.child("dnsTimeout"), "must be at most 30s");
  }
  if (auto n = f.take("dnsServers")) {
    r.sequence(n, f.child("dnsServers"));
    if (n.size() > 3) fail(r.source, n, f.child("dnsServers"), "at most 3 servers");
    for (std::size_t i = 0; i < n.size(); ++i) {
      const std::string path = f.child("dnsServers") + "[" + std::to_string(i) + "]";
      const std::string v = r.host_port(n[i], path);
      const auto hp = parse_host_port(v);
      in_addr a{};
      if (inet_pton(AF_INET, std::string(hp->host).c_str(), &a) != 1 || hp->port == 0)
        fail(r.source, n[i], path, "expected IPv4:PORT, got '" + v + "'");
      s.dns_servers.push_back(v);
    }
  }
}

// server: the metrics endpoint, the endpoints file, the access log and the
// log level.
void read_server_observability(const Reader& r, Fields& f, ServerOptions& s) {
  if (auto n = f.take("adminOpenMetrics"))
    s.admin_open_metrics = r.boolean(n, f.child("adminOpenMetrics"));
  if (auto n = f.take("endpointsFile")) s.endpoints_file = r.string(n, f.child("endpointsFile"));
  if (auto n = f.take("accessLog")) s.access_log = r.string(n, f.child("accessLog"));
  if (auto n = f.take("accessLogFormat")) {
    s.access_log_format = r.string(n, f.child("accessLogFormat"));
    if (s.access_log_format != "json" && s.access_log_format != "text")
      fail(r.source, n, f.child("accessLogFormat"), "must be json or text");
  }
  if (auto n = f.take("logLevel")) {
    s.log_level = r.string(n, f.child("logLevel"));
    if (s.log_level != "debug" && s.log_level != "info" && s.log_level != "warn" &&
        s.log_level != "error")
      fail(r.source, n, f.child("logLevel"), "must be debug, info, warn or error");
  }
  if (auto n = f.take("metricsMaxFlows")) {
    auto v = r.integer(n, f.child("metricsMaxFlows"));
    if (v < 0 || v > 100000)
      fail(r.source, n, f.child("metricsMaxFlows"), "must be between 0 and 100000");
    s.metrics_max_flows = static_cast<std::uint32_t>(v);
  }
}

// server: when a failing endpoint is ejected, and for how long (the max
// never below the base, whether set or not).
void read_server_ejection(const Reader& r, Fields& f, const YAML::Node& node, ServerOptions& s) {
  if (auto n = f.take("endpointEjectionConsecutiveFailures")) {
    auto v = r.integer(n, f.child("endpointEjectionConsecutiveFailures"));
    if (v < 0 || v > 1000)
      fail(r.source, n, f.child("endpointEjectionConsecutiveFailures"),
           "must be between 0 (off) and 1000");
    s.endpoint_ejection_consecutive_failures = static_cast<std::uint32_t>(v);
  }
  if (auto n = f.take("endpointEjectionBaseTime"))
    s.endpoint_ejection_base_time = positive(r, n, f.child("endpointEjectionBaseTime"),
                                             r.duration(n, f.child("endpointEjectionBaseTime")));
  if (auto n = f.take("endpointEjectionMaxTime")) {
    s.endpoint_ejection_max_time = positive(r, n, f.child("endpointEjectionMaxTime"),
                                            r.duration(n, f.child("endpointEjectionMaxTime")));
    if (s.endpoint_ejection_max_time < s.endpoint_ejection_base_time)
      fail(r.source, n, f.child("endpointEjectionMaxTime"),
           "must not be less than endpointEjectionBaseTime");
  } else if (s.endpoint_ejection_max_time < s.endpoint_ejection_base_time) {
    fail(r.source, node, "server.endpointEjectionBaseTime",
         "must not be more than endpointEjectionMaxTime (30s unless set)");
  }
}

// server.tls: the TLS listener, its files and what it offers. The files
// are read when the listener starts (proxy/tls_context.h), not here.
void read_server_tls(const Reader& r, const YAML::Node& node, TlsOptions& t) {
  Fields f(r.source, node, "server.tls");
  auto required = [&](const char* key) {
    auto n = f.take(key);
    if (!n) fail(r.source, node, f.child(key), "is required");
    return n;
  };
  t.listen = r.host_port(required("listen"), f.child("listen"));
  t.certificate_file = r.string(required("certificateFile"), f.child("certificateFile"));
  t.key_file = r.string(required("keyFile"), f.child("keyFile"));
  if (auto n = f.take("minVersion")) {
    t.min_version = r.scalar(n, f.child("minVersion"));
    if (t.min_version != "1.2" && t.min_version != "1.3")
      fail(r.source, n, f.child("minVersion"),
           "must be \"1.2\" or \"1.3\" (TLS 1.0 and 1.1 are never offered), got '" + t.min_version +
               "'");
  }
  if (auto n = f.take("ciphers")) t.ciphers = r.scalar(n, f.child("ciphers"));
  if (auto n = f.take("cipherSuites")) t.cipher_suites = r.scalar(n, f.child("cipherSuites"));
  if (auto n = f.take("clientCaFile")) t.client_ca_file = r.scalar(n, f.child("clientCaFile"));
  if (auto n = f.take("requireClientCertificate")) {
    t.require_client_certificate = r.boolean(n, f.child("requireClientCertificate"));
    if (t.require_client_certificate && t.client_ca_file.empty())
      fail(r.source, n, f.child("requireClientCertificate"),
           "needs clientCaFile (the CAs client certificates are verified against)");
  }
  if (auto n = f.take("reloadCheckInterval"))
    t.reload_check_interval = positive(r, n, f.child("reloadCheckInterval"),
                                       r.duration(n, f.child("reloadCheckInterval")));
  f.finish();
}

// server.listen and server.tls.listen: at least one listener, and not the
// same address twice (port 0 asks for a free port each time).
void check_listeners(const Reader& r, const YAML::Node& node, const ServerOptions& s) {
  if (s.listen.empty() && !s.tls.enabled())
    fail(r.source, node["listen"], "server.listen",
         "must not be empty without server.tls (no listener at all)");
  const auto hp = parse_host_port(s.listen);
  if (s.tls.enabled() && s.listen == s.tls.listen && hp && hp->port != 0)
    fail(r.source, node["tls"]["listen"], "server.tls.listen",
         "is server.listen's address; the TLS listener needs its own");
}

// server.upstreamTls, endpoints[].tls: TLS towards the model servers. The
// files are read when the request policy is built (datalayer/upstream_tls.h).
UpstreamTlsOptions read_upstream_tls(const Reader& r, const YAML::Node& node,
                                     const std::string& path) {
  UpstreamTlsOptions t;
  Fields f(r.source, node, path);
  t.enabled = true;
  if (auto n = f.take("enabled")) t.enabled = r.boolean(n, f.child("enabled"));
  if (auto n = f.take("caFile")) t.ca_file = r.scalar(n, f.child("caFile"));
  if (auto n = f.take("serverName")) t.server_name = r.scalar(n, f.child("serverName"));
  if (auto n = f.take("certificateFile"))
    t.certificate_file = r.scalar(n, f.child("certificateFile"));
  if (auto n = f.take("keyFile")) t.key_file = r.scalar(n, f.child("keyFile"));
  if (auto n = f.take("insecureSkipVerify"))
    t.insecure_skip_verify = r.boolean(n, f.child("insecureSkipVerify"));
  if (t.certificate_file.empty() != t.key_file.empty())
    fail(r.source, node, f.child(t.key_file.empty() ? "keyFile" : "certificateFile"),
         "is required with " + std::string(t.key_file.empty() ? "certificateFile" : "keyFile"));
  f.finish();
  return t;
}

// A credential file's token, or a config error at `node` naming the file.
std::string credential_from(const Reader& r, const YAML::Node& node, const std::string& path,
                            const std::string& file) {
  try {
    return read_credential_file(file);
  } catch (const ConfigError& e) {
    fail(r.source, node, path, e.what());
  }
}

// server:, its fields read (and checked) in this order.
void read_server(const Reader& r, const YAML::Node& node, ServerOptions& s) {
  Fields f(r.source, node, "server");
  read_server_threads(r, f, s);
  read_server_limits(r, f, s);
  read_server_timeouts(r, f, s);
  read_server_dns(r, f, s);
  read_server_observability(r, f, s);
  read_server_ejection(r, f, node, s);
  if (auto n = f.take("upstreamMaxIdlePerEndpoint")) {
    auto v = r.integer(n, f.child("upstreamMaxIdlePerEndpoint"));
    if (v < 0 || v > 100000)
      fail(r.source, n, f.child("upstreamMaxIdlePerEndpoint"), "must be between 0 and 100000");
    s.upstream_max_idle_per_endpoint = static_cast<std::uint32_t>(v);
  }
  if (auto n = f.take("tls")) read_server_tls(r, n, s.tls);
  if (auto n = f.take("upstreamTls"))
    s.upstream_tls = read_upstream_tls(r, n, f.child("upstreamTls"));
  if (auto n = f.take("upstreamCredentialFile")) {
    s.upstream_credential_file = r.string(n, f.child("upstreamCredentialFile"));
    s.upstream_credential =
        credential_from(r, n, f.child("upstreamCredentialFile"), s.upstream_credential_file);
  }
  f.finish();
  check_listeners(r, node, s);
}

void read_endpoints(const Reader& r, const YAML::Node& node, std::vector<EndpointConfig>& out,
                    bool credentials = true) {
  if (node.IsSequence() && node.size() > kMaxEndpoints)
    fail(r.source, node, "endpoints",
         "at most " + std::to_string(kMaxEndpoints) + " endpoints (" + std::to_string(node.size()) +
             " given)");
  std::set<std::string> seen;
  read_list(r, node, "endpoints", out, [&](Fields& f, const YAML::Node& item, EndpointConfig& ep) {
    ep.line = item.Mark().line + 1;
    auto addr = f.take("address");
    auto dns = f.take("dns");
    if (addr && dns) fail(r.source, dns, f.child("dns"), "set either address or dns, not both");
    if (!addr && !dns) fail(r.source, item, f.child("address"), "is required (or dns)");
    const std::string key = dns ? "dns" : "address";
    const YAML::Node& value = dns ? dns : addr;
    const std::string given = r.host_port(value, f.child(key));
    auto hp = parse_host_port(given);
    ep.host = std::string(hp->host);
    ep.port = hp->port;
    if (ep.port == 0) fail(r.source, value, f.child(key), "port must not be 0");
    if (dns) {
      ep.dns = given;
    } else {
      ep.address = given;
    }
    if (!seen.insert(key + " " + given).second)
      fail(r.source, value, f.child(key),
           std::string(dns ? "duplicate dns entry " : "duplicate endpoint ") + given);
    if (auto n = f.take("schedulingPolicy")) {
      auto v = r.string(n, f.child("schedulingPolicy"));
      if (v != "fcfs" && v != "priority")
        fail(r.source, n, f.child("schedulingPolicy"), "must be fcfs or priority");
      ep.priority_scheduling = v == "priority";
    }
    if (auto n = f.take("engine")) {
      ep.engine = r.string(n, f.child("engine"));
      if (ep.engine != "vllm" && ep.engine != "sglang" && ep.engine != "trtllm-serve")
        fail(r.source, n, f.child("engine"),
             "unknown engine '" + ep.engine + "' (expected vllm, sglang or trtllm-serve)");
    }
    if (auto n = f.take("credentialFile")) {
      if (!credentials)
        fail(r.source, n, f.child("credentialFile"),
             "belongs in the config, not the endpoints file");
      if (dns) fail(r.source, n, f.child("credentialFile"), "is for address entries, not dns");
      ep.credential_file = r.string(n, f.child("credentialFile"));
      ep.credential = credential_from(r, n, f.child("credentialFile"), ep.credential_file);
    }
    if (auto n = f.take("tls")) {
      if (!credentials)
        fail(r.source, n, f.child("tls"), "belongs in the config, not the endpoints file");
      if (dns)
        fail(r.source, n, f.child("tls"), "is for address entries (dns: server.upstreamTls)");
      ep.tls = read_upstream_tls(r, n, f.child("tls"));
    }
    if (auto n = f.take("labels")) {
      if (!n.IsMap()) fail(r.source, n, f.child("labels"), "expected a mapping of label: value");
      for (const auto& kv : n) {
        auto key = r.string(kv.first, f.child("labels"));
        ep.labels[key] = r.scalar(kv.second, f.child("labels") + "." + key);
      }
    }
  });
}

void read_objectives(const Reader& r, const YAML::Node& node, std::vector<ObjectiveConfig>& out) {
  std::set<std::string> seen;
  read_list(r, node, "objectives", out, [&](Fields& f, const YAML::Node& item, ObjectiveConfig& o) {
    o.name = unique_key(r, f, item, "name", seen, "objective");
    if (auto n = f.take("priority")) {
      auto v = r.integer(n, f.child("priority"));
      if (v < -1000000 || v > 1000000)
        fail(r.source, n, f.child("priority"), "must be between -1000000 and 1000000");
      o.priority = static_cast<int>(v);
    }
    if (auto n = f.take("ttl")) {
      o.ttl = r.duration(n, f.child("ttl"));
      if (o.ttl->count() <= 0) fail(r.source, n, f.child("ttl"), "must be greater than zero");
    }
  });
}

void read_flows(const Reader& r, const YAML::Node& node, std::vector<FlowConfig>& out) {
  std::set<std::string> seen;
  read_list(r, node, "flows", out, [&](Fields& f, const YAML::Node& item, FlowConfig& fl) {
    fl.id = unique_key(r, f, item, "id", seen, "flow");
    if (auto n = f.take("weight")) {
      fl.weight = r.number(n, f.child("weight"));
      if (!(fl.weight >= kMinFlowWeight) || fl.weight > kMaxFlowWeight)
        fail(r.source, n, f.child("weight"), "must be at least 0.000001 and at most 1000000");
    }
  });
}

// One error for every llm-d plugin type sluice does not build (issue 40,
// item 4): each with its line, what it needs and what to use instead.
void fail_unsupported(const Reader& r,
                      const std::vector<std::pair<const LlmdPluginType*, int>>& all) {
  std::string out = r.source + ": plugins: " + std::to_string(all.size()) +
                    (all.size() == 1 ? " llm-d plugin type" : " llm-d plugin types") +
                    " sluice does not support:";
  for (const auto& [e, line] : all)
    out += "\n  line " + std::to_string(line) + ": " + std::string(e->type) + " needs " +
           std::string(e->needs) + "; instead: " + std::string(e->instead);
  out += "\n(docs/configuration.md lists every llm-d plugin type and what sluice does with it)";
  throw ConfigError(out);
}

void read_plugins(const Reader& r, const YAML::Node& node, std::vector<PluginSpec>& out) {
  std::set<std::string> names;
  std::vector<std::pair<const LlmdPluginType*, int>> unsupported;
  read_list(r, node, "plugins", out, [&](Fields& f, const YAML::Node& item, PluginSpec& p) {
    p.line = item.Mark().line + 1;
    auto type = f.take("type");
    if (!type) fail(r.source, item, f.child("type"), "is required");
    p.type = r.string(type, f.child("type"));
    if (const LlmdPluginType* e = unsupported_llmd_plugin(p.type)) {
      unsupported.emplace_back(e, type.Mark().line + 1);
      f.take("name");
      f.take("parameters");
      return;
    }
    if (!is_known_plugin_type(p.type))
      fail(r.source, type, f.child("type"),
           "unknown plugin type '" + p.type + "' (known: " + known_plugin_types() + ")");
    p.name = p.type;
    auto name = f.take("name");
    if (name) p.name = r.string(name, f.child("name"));
    if (!names.insert(p.name).second)
      fail(r.source, name ? name : type, f.child(name ? "name" : "type"),
           "duplicate plugin name '" + p.name + "'");
    if (auto n = f.take("parameters")) {
      if (!n.IsMap() && !n.IsNull()) fail(r.source, n, f.child("parameters"), "expected a mapping");
      p.parameters = n;
    }
  });
  if (!unsupported.empty()) fail_unsupported(r, unsupported);
}

void read_profiles(const Reader& r, const YAML::Node& node, const std::vector<PluginSpec>& plugins,
                   std::vector<SchedulingProfileSpec>& out) {
  std::set<std::string> names;
  read_list(r, node, "schedulingProfiles", out,
            [&](Fields& f, const YAML::Node& item, SchedulingProfileSpec& prof) {
              prof.name = unique_key(r, f, item, "name", names, "profile");
              auto list = f.take("plugins");
              if (!list) return;
              read_list(r, list, f.child("plugins"), prof.plugins,
                        [&](Fields& pf, const YAML::Node& entry, ProfilePluginRef& ref) {
                          ref.line = entry.Mark().line + 1;
                          auto pr = pf.take("pluginRef");
                          if (!pr) fail(r.source, entry, pf.child("pluginRef"), "is required");
                          ref.plugin_ref = r.string(pr, pf.child("pluginRef"));
                          bool known = false;
                          for (const auto& p : plugins) known = known || p.name == ref.plugin_ref;
                          if (!known)
                            fail(r.source, pr, pf.child("pluginRef"),
                                 "refers to '" + ref.plugin_ref + "', which is not in plugins");
                          if (auto w = pf.take("weight")) {
                            ref.weight = r.number(w, pf.child("weight"));
                            if (*ref.weight < 0)
                              fail(r.source, w, pf.child("weight"), "must not be negative");
                          }
                        });
            });
}

void read_redis(const Reader& r, RedisSpec& s, const YAML::Node& node) {
  Fields f(r.source, node, "redis");
  s.enabled = true;
  const YAML::Node address = f.take("address");
  const YAML::Node socket = f.take("unixSocket");
  if (address && socket)
    fail(r.source, socket, "redis.unixSocket", "set either address or unixSocket, not both");
  if (address) {
    const std::string a = r.host_port(address, "redis.address");
    const auto hp = parse_host_port(a);
    s.host = std::string(hp->host);
    s.port = hp->port;
    if (s.port == 0) fail(r.source, address, "redis.address", "port must not be 0");
  }
  if (socket) {
    s.unix_socket = r.string(socket, "redis.unixSocket");
    if (s.unix_socket.size() >= 108)
      fail(r.source, socket, "redis.unixSocket", "is longer than a unix socket path may be");
  }
  if (auto n = f.take("user")) s.user = r.string(n, "redis.user");
  if (auto n = f.take("passwordFile")) {
    s.password_file = r.string(n, "redis.passwordFile");
    std::string text;
    try {
      text = read_bounded(s.password_file, true);
    } catch (const ConfigError& e) {
      fail(r.source, n, "redis.passwordFile", e.what());
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (text.empty()) fail(r.source, n, "redis.passwordFile", "the file is empty");
    if (text.size() > 512) fail(r.source, n, "redis.passwordFile", "holds more than 512 bytes");
    s.password = std::move(text);
  }
  if (!s.user.empty() && s.password.empty())
    fail(r.source, node, "redis.user", "needs redis.passwordFile");
  if (auto n = f.take("keyPrefix")) {
    s.key_prefix = r.string(n, "redis.keyPrefix");
    if (s.key_prefix.size() > 64) fail(r.source, n, "redis.keyPrefix", "must be at most 64 bytes");
    for (unsigned char ch : s.key_prefix)
      if (!std::isalnum(ch) && ch != '-' && ch != '_' && ch != ':' && ch != '.' && ch != '{' &&
          ch != '}')
        fail(r.source, n, "redis.keyPrefix", "may hold letters, digits and -_:.{} only");
  }
  if (auto n = f.take("replicaId")) {
    s.replica_id = r.string(n, "redis.replicaId");
    if (s.replica_id.size() > 128)
      fail(r.source, n, "redis.replicaId", "must be at most 128 bytes");
    for (unsigned char ch : s.replica_id)
      if (ch <= ' ' || ch >= 0x7f)
        fail(r.source, n, "redis.replicaId", "must be printable ASCII without spaces");
  }
  auto span = [&](const char* key, nanoseconds& out, nanoseconds min, nanoseconds max,
                  const char* range) {
    if (auto n = f.take(key)) {
      out = r.duration(n, std::string("redis.") + key);
      if (out < min || out > max)
        fail(r.source, n, std::string("redis.") + key, std::string("must be ") + range);
    }
  };
  span("syncInterval", s.sync_interval, 1ms, 10s, "between 1ms and 10s");
  span("timeout", s.timeout, 1ms, 60s, "between 1ms and 60s");
  const YAML::Node lease = node["lease"];
  span("lease", s.lease, 10ms, 1h, "between 10ms and 1h");
  span("maxHold", s.max_hold, 0ns, 60s, "between 0s and 60s");
  if (s.lease < 2 * s.sync_interval)
    fail(r.source, lease ? lease : node, "redis.lease",
         "must be at least twice redis.syncInterval");
  if (auto n = f.take("fairnessSlack")) {
    s.fairness_slack = r.number(n, "redis.fairnessSlack");
    if (!(s.fairness_slack >= 0) || s.fairness_slack > 1e12)
      fail(r.source, n, "redis.fairnessSlack", "must be between 0 and 1e12");
  }
  if (auto n = f.take("maxReplicas")) {
    const long long v = r.integer(n, "redis.maxReplicas");
    if (v < 1 || v > 1024) fail(r.source, n, "redis.maxReplicas", "must be between 1 and 1024");
    s.max_replicas = static_cast<std::uint32_t>(v);
  }
  f.finish();
}

// auth:, tenants: (auth_config.cc) and quota: (quota_config.cc).
void read_identity(const Reader& r, Fields& f, Config& c) {
  auto auth = f.take("auth");
  if (auth) read_auth(r, auth, c.auth);
  if (auto n = f.take("quota")) read_quota(r, n, c.quota);
  if (auto n = f.take("tenants")) {
    read_tenants(r, n, c.objectives, c.tenants);
    tenant_weights_to_flows(r, n, c);
    check_quotas(r, n, c);
  }
  // A certificate's name is a tenant only where the config says which: a
  // name is never cut down to one (issue 39, item 2).
  if (c.auth.client_certificate_tenants &&
      std::none_of(c.tenants.begin(), c.tenants.end(),
                   [](const TenantSpec& t) { return !t.certificate_names.empty(); }))
    fail(r.source, auth["clientCertificateTenants"], "auth.clientCertificateTenants",
         "no tenant lists certificateNames: say which certificate names are which tenant "
         "(tenants[].certificateNames)");
}

Config parse(const YAML::Node& root, const std::string& source) {
  Config c;
  c.source = source;
  Reader r{c.source};
  if (root.IsNull()) return c;  // an empty file is a valid, all-defaults config
  for (const char* key : {"plugins", "schedulingProfiles", "parser", "data", "dataLayer",
                          "saturationDetector", "featureGates", "requestHandler"}) {
    if (!root.IsMap() || !root[key]) continue;
    c.scheduling_fingerprint += key;
    c.scheduling_fingerprint += '\n';
    c.scheduling_fingerprint += YAML::Dump(root[key]);
    c.scheduling_fingerprint += '\n';
  }
  Fields f(c.source, root, "");
  if (auto n = f.take("apiVersion")) {
    c.api_version = r.string(n, "apiVersion");
    if (!is_supported_api_version(c.api_version))
      fail(c.source, n, "apiVersion",
           "unsupported '" + c.api_version +
               "' (expected llm-d.ai/v1, llm-d.ai/v1alpha1 or "
               "inference.networking.x-k8s.io/v1alpha1)");
  }
  if (auto n = f.take("kind")) {
    c.kind = r.string(n, "kind");
    if (c.kind != "EndpointPickerConfig")
      fail(c.source, n, "kind", "unsupported '" + c.kind + "' (expected EndpointPickerConfig)");
  }
  if (auto n = f.take("server")) read_server(r, n, c.server);
  if (auto n = f.take("endpoints")) {
    read_endpoints(r, n, c.endpoints);
    std::vector<EndpointConfig> plain;
    for (auto& e : c.endpoints) (e.dns.empty() ? plain : c.dns_endpoints).push_back(std::move(e));
    c.endpoints = std::move(plain);
  }
  if (auto n = f.take("objectives")) read_objectives(r, n, c.objectives);
  if (auto n = f.take("flows")) read_flows(r, n, c.flows);
  if (auto n = f.take("plugins")) read_plugins(r, n, c.plugins);
  if (auto n = f.take("schedulingProfiles")) read_profiles(r, n, c.plugins, c.scheduling_profiles);
  if (auto n = f.take("featureGates")) read_feature_gates(r, c, n);
  auto mapping = [&](const char* key, YAML::Node& out) {
    if (auto n = f.take(key)) {
      if (!n.IsMap()) fail(c.source, n, key, "expected a mapping");
      out = n;
    }
  };
  mapping("parser", c.parser);
  mapping("data", c.data);             // GIE v1.3-v1.4
  mapping("dataLayer", c.data_layer);  // GIE v1.5+
  if (auto n = f.take("requestHandler")) read_request_handler(r, c, n);
  read_plugin_parameters(r, c);
  // A detector declared under plugins: but not referenced still gets its
  // parameters checked; the referenced one is kept.
  for (const auto& p : c.plugins) {
    if (!is_detector_type(p.type)) continue;
    read_detector_parameters(r, p, c.detectors[p.name]);
  }
  if (auto n = f.take("saturationDetector")) read_saturation_detector(r, c, n);
  // Every usage-limit policy declared gets its parameters checked, used or not.
  for (const auto& p : c.plugins)
    if (is_usage_limit_type(p.type)) read_usage_limit(r, p);
  if (auto n = f.take("flowControl")) read_flow_control(r, c, n);
  if (auto n = f.take("redis")) read_redis(r, c.redis, n);
  read_identity(r, f, c);
  check_request_handler(r, c, root);
  for (const auto& g : c.feature_gates) {
    if (g == "flowControl") c.flow_control.enabled = true;
  }
  f.finish();
  return c;
}

}  // namespace

bool is_known_plugin_type(const std::string& type) {
  const ExtensionType* e = builtin_extension(type);
  return e && e->declarable;
}

std::string known_plugin_types() {
  std::string out;
  for (const auto& e : kBuiltinExtensionTypes)
    if (e.declarable) out += (out.empty() ? "" : ", ") + std::string(e.type);
  return out;
}

Config load_config_string(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    std::ostringstream out;
    out << source << ":" << e.mark.line + 1 << ": (syntax): " << e.msg;
    throw ConfigError(out.str());
  }
  reject_duplicate_keys(source, root);
  return parse(root, source);
}

Config load_config_file(const std::string& path) {
  return load_config_string(read_bounded(path, true), path);
}

std::string read_regular_file(const std::string& path, std::size_t max_bytes) {
  return read_bounded(path, false, max_bytes);
}

std::string read_credential_file(const std::string& path) {
  std::string text = read_bounded(path, false);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (text.empty()) throw ConfigError(path + ": the credential file is empty");
  if (text.size() > 4096) throw ConfigError(path + ": the credential is longer than 4096 bytes");
  for (unsigned char ch : text)
    if (ch < 0x21 || ch > 0x7e)
      throw ConfigError(path +
                        ": the credential must be printable ASCII without spaces or line breaks");
  return text;
}

UpstreamCredentials upstream_credentials(const Config& c) {
  UpstreamCredentials out;
  if (!c.server.upstream_credential.empty()) out.pool = "Bearer " + c.server.upstream_credential;
  for (const auto& e : c.endpoints)
    if (!e.credential.empty()) out.by_address[e.address] = "Bearer " + e.credential;
  return out;
}

std::vector<EndpointConfig> load_endpoints_file(const std::string& path) {
  const std::string text = read_bounded(path, false);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ": (syntax): " + e.msg);
  }
  reject_duplicate_keys(path, root);
  std::vector<EndpointConfig> out;
  if (root.IsNull()) return out;
  Reader r{path};
  Fields f(path, root, "");
  if (auto n = f.take("endpoints")) {
    read_endpoints(r, n, out, false);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (!out[i].dns.empty())
        fail(path, n[i], "endpoints[" + std::to_string(i) + "].dns",
             "dns entries belong in the config, not the endpoints file");
  }
  f.finish();
  return out;
}

}  // namespace sluice::config

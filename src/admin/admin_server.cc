#include "admin/admin_server.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>

#include "admin/auth.h"
#include "admin/handlers.h"
#include "config/units.h"
#include "fleet/fleet_sync.h"
#include "flowcontrol/fairness_policies.h"
#include "flowcontrol/ordering_policies.h"
#include "observe/log.h"
#include "proxy/proxy_context.h"

namespace sluice::admin {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Reply = AdminServer::Reply;

namespace {

// Rendering never throws: bytes that are not UTF-8 (a Latin-1 fairness id, an
// endpoint label, a path) come out as U+FFFD.
constexpr auto kReplace = json::error_handler_t::replace;

double ms_since(flowcontrol::TimePoint t, flowcontrol::TimePoint now) {
  return std::chrono::duration<double, std::milli>(now - t).count();
}

json flow_json(const registry::FlowSummary& f, const flowcontrol::FairnessParams& prices,
               flowcontrol::TimePoint now) {
  json outcomes = json::object();
  for (int o = 1; o < kQueueOutcomeCount; ++o)
    if (f.stats.outcomes[o])
      outcomes[std::string(dropped_reason(static_cast<QueueOutcome>(o)))] = f.stats.outcomes[o];
  const auto& s = f.stats;
  return json{{"id", f.id},
              {"priority", f.priority},
              {"band", f.band},
              {"weight", f.weight},
              {"queued", f.queued},
              {"queuedBytes", f.bytes},
              {"inFlight", f.in_flight},
              {"dispatched", s.dispatched},
              {"completed", s.completed},
              {"outcomes", outcomes},
              {"inputTokens", s.input_tokens},
              {"outputTokens", s.output_tokens},
              {"tokensCharged",
               s.input_tokens * prices.input_price + s.output_tokens * prices.output_price},
              {"lastActiveMsAgo", ms_since(f.last_active, now)}};
}

json override_json(const registry::FlowOverride& o) {
  json j = json::object();
  if (o.weight) j["weight"] = *o.weight;
  if (o.priority) j["priority"] = *o.priority;
  if (o.max_queued) j["maxQueued"] = *o.max_queued;
  return j;
}

// The flows of one id (one per priority): a lookup per band, on the
// dispatcher.
json flows_json(flowcontrol::Controller& c, const std::string& id) {
  const auto now = flowcontrol::Clock::now();
  json out = json::array();
  for (const auto& [p, band] : c.registry().bands()) {
    if (const registry::Flow* f = band->flows().find(id))
      out.push_back(flow_json(registry::FlowRegistry::summarize(*f), c.fairness_prices(), now));
  }
  return out;
}

json band_json(const registry::Band& b, const flowcontrol::Controller& c) {
  const auto& bc = b.config();
  json j{{"priority", b.priority()},
         {"configured", b.configured()},
         {"maxBytes", bc.max_bytes},
         {"maxRequests", bc.max_requests},
         {"fairnessPolicy", bc.fairness},
         {"orderingPolicy", bc.ordering},
         {"antiStarvationShare", bc.share},
         {"queued", b.requests()},
         {"queuedBytes", b.bytes()},
         {"flows", b.flows().size()},
         {"backloggedFlows", b.backlogged_flows()}};
  // The usage-limit policy's ceiling at the last dispatch decision.
  for (const auto& bc2 : c.band_ceilings())
    if (bc2.priority == b.priority()) j["ceiling"] = bc2.ceiling;
  return j;
}

}  // namespace

// One admin connection (outside the anonymous namespace: AdminServer lists
// the ones still reading, see reading_).
class AdminSession : public std::enable_shared_from_this<AdminSession> {
 public:
  AdminSession(tcp::socket s, AdminServer& admin, proxy::ConnectionLimit::Permit permit)
      : stream_(std::move(s)), admin_(admin), permit_(std::move(permit)) {
    beast::error_code ec;
    const auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = remote.address();
  }
  ~AdminSession() { stop_reading(); }
  void start() { read(); }
  const net::ip::address& peer() const { return peer_; }

  // Makes room for a newer connection (AdminServer::reading_): closes this
  // one, whose request is not whole, and hands over its slot.
  proxy::ConnectionLimit::Permit give_up_slot() {
    stop_reading();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();  // the pending read ends, and with it the session
    return std::move(permit_);
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(1u << 20);
    parser_->header_limit(16u << 10);
    stream_.expires_after(std::chrono::seconds(30));
    reading_at_ = admin_.reading_.insert(admin_.reading_.end(), this);
    reading_ = true;
    http::async_read(
        stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
          self->stop_reading();
          // Its slot went to a newer connection while this completion was
          // already queued: the request is not run (the client saw a reset).
          if (!self->permit_) return self->close();
          if (!ec) return self->on_request();
          // A request we refuse gets an answer, then the
          // connection closes (its remaining bytes are unread).
          self->keep_alive_ = false;
          if (ec == http::error::body_limit)
            return self->write(
                error_reply(413, "body-too-large", "admin request body exceeds 1 MiB"));
          if (ec == http::error::header_limit)
            return self->write(
                error_reply(431, "headers-too-large", "admin request headers exceed 16 KiB"));
          if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
              ec != http::error::end_of_stream && ec != http::error::partial_message)
            return self->write(
                error_reply(400, "bad-request", "malformed HTTP request: " + ec.message()));
          self->close();  // timeout, reset, or the client closed
        });
  }

  void on_request() {
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    admin_.handle(std::string(req.method_string()), std::string(req.target()),
                  std::string(req[http::field::authorization]), req.body(),
                  [self = shared_from_this()](Reply r) { self->write(std::move(r)); });
  }

  void write(Reply r) {
    res_ = {};
    res_.result(static_cast<http::status>(r.status));
    res_.version(11);
    res_.set(http::field::content_type, r.status == 200 && r.body.rfind("# HELP", 0) == 0
                                            ? "text/plain; version=0.0.4"
                                            : "application/json");
    if (r.status == 401) res_.set(http::field::www_authenticate, "Bearer");
    if (r.total) res_.set("x-total-count", std::to_string(*r.total));
    res_.keep_alive(keep_alive_);
    res_.body() = std::move(r.body);
    res_.prepare_payload();
    http::async_write(stream_, res_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec || !self->keep_alive_) return self->close();
                        self->read();
                      });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  void stop_reading() {
    if (reading_) admin_.reading_.erase(reading_at_);
    reading_ = false;
  }

  beast::tcp_stream stream_;
  AdminServer& admin_;
  // Unparsed bytes at most: a head, a chunk-size line or a trailer (Beast
  // 1.81 bounds the last two by nothing else); over it, 400 bad-request.
  beast::flat_buffer buffer_{(1u << 20) + (64u << 10)};
  proxy::ConnectionLimit::Permit permit_;  // one of server.adminMaxConnections
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  bool keep_alive_ = true;
  net::ip::address peer_;  // the client's address (unspecified if unknown)
  bool reading_ = false;   // listed in admin_.reading_ at reading_at_
  std::list<AdminSession*>::iterator reading_at_;
};

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto a = net::ip::make_address(host, ec);
  return !ec && a.is_loopback();
}

AdminServer::AdminServer(Backend& backend, std::string token)
    : backend_(backend), ctx_(backend.context()), token_(std::move(token)) {}

AdminServer::~AdminServer() { stop(); }

std::string AdminServer::bind(const std::string& listen) {
  auto hp = config::parse_host_port(listen);
  if (!hp) throw std::runtime_error("invalid admin listen address '" + listen + "'");
  tcp::resolver resolver(ioc_);
  auto addr = resolver.resolve(std::string(hp->host), std::to_string(hp->port)).begin()->endpoint();
  acceptor_.emplace(ioc_);
  acceptor_->open(addr.protocol());
  acceptor_->set_option(net::socket_base::reuse_address(true));
  acceptor_->bind(addr);
  acceptor_->listen();
  auto bound = acceptor_->local_endpoint();
  std::string host = bound.address().to_string();
  if (bound.address().is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(bound.port());
}

void AdminServer::start() {
  accept();
  if (fleet())
    fleet()->set_operation_handler([this](const fleet::FleetOperation& op) {
      apply_replicated(FleetOperationView{op.method, op.target, op.body});
    });
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sluice-admin");
    // A handler that throws must not take the process down with it: log it,
    // drop that call, keep serving the admin plane.
    for (;;) {
      try {
        ioc_.run();
        return;
      } catch (const std::exception& e) {
        SLUICE_LOG(kError, "admin", "admin handler failed: " << e.what());
      }
    }
  });
}

void AdminServer::stop() {
  if (!thread_.joinable()) return;
  if (fleet()) fleet()->set_operation_handler({});
  ioc_.stop();
  thread_.join();
}

void AdminServer::accept() {
  acceptor_->async_accept([this](boost::system::error_code ec, tcp::socket s) {
    if (ec == net::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) and the like: the pending
      // connection stays in the backlog and a re-armed accept fails at once,
      // a spin at 100% CPU. Back off as the data plane does.
      // (The timer is owned by its own handler: no new shared_ptr type,
      // whose first UBSan vptr check would need a descriptor to pass.)
      SLUICE_LOG_LIMITED(kWarn, "admin", "accept failed: " << ec.message());
      auto timer = std::make_unique<net::steady_timer>(ioc_, std::chrono::milliseconds(50));
      auto& t = *timer;
      t.async_wait([this, timer = std::move(timer)](boost::system::error_code wait_ec) {
        if (!wait_ec && acceptor_->is_open()) accept();
      });
      return;
    }
    auto permit = ctx_.admin_connections.try_acquire(/*count_refusal=*/reading_.empty());
    if (!permit && !reading_.empty()) {
      // Full: a connection without a whole request makes room (reading_):
      // the oldest of the client address that holds the most of them, so a
      // flood from one place pushes out its own connections first, not a
      // probe's or an operator's from elsewhere.
      std::map<net::ip::address, std::size_t> unfinished;
      AdminSession* victim = nullptr;
      std::size_t most = 0;
      for (AdminSession* session : reading_) most = std::max(most, ++unfinished[session->peer()]);
      for (AdminSession* session : reading_)
        if (unfinished[session->peer()] == most) {
          victim = session;  // the list runs oldest first
          break;
        }
      permit = victim->give_up_slot();
      ctx_.admin_connections.note_displaced();
      SLUICE_LOG_LIMITED(kWarn, "admin",
                         ctx_.admin_connections.max()
                             << " connections open (server.adminMaxConnections): closed the "
                                "oldest one without a whole request to make room");
    }
    if (!permit) {
      SLUICE_LOG_LIMITED(kWarn, "admin",
                         "connection refused: " << ctx_.admin_connections.max()
                                                << " open (server.adminMaxConnections)");
      proxy::ConnectionLimit::refuse(s.native_handle());
      boost::system::error_code ignored;
      s.close(ignored);
      return accept();
    }
    std::make_shared<AdminSession>(std::move(s), *this, std::move(permit))->start();
    accept();
  });
}

void AdminServer::handle(const std::string& method, const std::string& target,
                         const std::string& authorization, const std::string& body,
                         std::function<void(Reply)> respond) {
  const std::string path = target.substr(0, target.find('?'));
  // With a token, every route needs it but the probes: flows, bands,
  // endpoints and drain state name tenants and traffic. /metrics only when
  // server.adminOpenMetrics says so.
  const bool open = path == "/healthz" || path == "/readyz" ||
                    (path == "/metrics" && ctx_.config.server.admin_open_metrics);
  if (!open && !token_.empty() && !bearer_matches(authorization, token_))
    return respond(
        error_reply(401, "unauthorized", "this call needs Authorization: Bearer <admin token>"));
  route(method, target, body, std::move(respond), false);
}

void AdminServer::apply_replicated(const FleetOperationView& op) {
  net::post(ioc_, [this, method = op.method, target = op.target, body = op.body] {
    route(
        method, target, body,
        [method, target](Reply r) {
          if (r.status >= 300) {
            SLUICE_LOG(kWarn, "fleet",
                       "a change made through another replica ("
                           << method << " " << target << ") failed here: " << r.status << " "
                           << r.body);
          } else {
            SLUICE_LOG(
                kInfo, "fleet",
                "applied a change made through another replica: " << method << " " << target);
          }
        },
        true);
  });
}

namespace {

// Changes every replica of a fleet applies: flow overrides, bands, and a
// drain asked for with ?scope=fleet (a plain drain is this replica's, as
// in a rolling restart).
bool fleet_wide(const std::string& method, const std::string& target) {
  const std::string path = target.substr(0, target.find('?'));
  if (method != "PUT" && method != "DELETE" && method != "POST") return false;
  if (path == "/admin/v1/drain")
    return method != "PUT" && target.find("scope=fleet") != std::string::npos;
  if (method == "POST") return false;
  return (path.rfind("/admin/v1/flows/", 0) == 0 && path.size() > 16) ||
         (path.rfind("/admin/v1/bands/", 0) == 0 && path.size() > 16);
}

}  // namespace

void AdminServer::route(const std::string& method, const std::string& target,
                        const std::string& body, std::function<void(Reply)> respond,
                        bool replicated) {
  const std::string path = target.substr(0, target.find('?'));
  if (!replicated && fleet() && fleet_wide(method, target)) {
    // Applied here first; stored for the others once it succeeded.
    respond = [this, method, target, body, respond = std::move(respond)](Reply r) {
      if (r.status >= 200 && r.status < 300)
        fleet()->publish_operation(fleet::FleetOperation{method, target, body});
      respond(std::move(r));
    };
  }
  if (path == "/healthz") {
    if (method != "GET") return respond(error_reply(405, "method-not-allowed", "use GET"));
    return respond(Reply{200, R"({"status":"ok"})"});
  }
  if (path == "/readyz") {
    if (method != "GET") return respond(error_reply(405, "method-not-allowed", "use GET"));
    const auto now = datalayer::Clock::now();
    const auto fresh = ctx_.config.saturation_detector.metrics_staleness_threshold;
    int ready = 0;
    for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
      const auto& ep = ctx_.endpoints.at(i);
      const auto at = ep.metrics_ns.load(std::memory_order_acquire);
      if (!ep.removed.load() && at != 0 &&
          now - datalayer::Clock::time_point(datalayer::Clock::duration(at)) <= fresh)
        ++ready;
    }
    if (ctx_.draining.load())
      return respond(Reply{503, json{{"status", "not ready"}, {"reason", "draining"}}.dump(
                                    -1, ' ', false, kReplace)});
    if (ready == 0)
      return respond(Reply{
          503, json{{"status", "not ready"}, {"reason", "no endpoint with fresh metrics"}}.dump(
                   -1, ' ', false, kReplace)});
    return respond(Reply{200, json{{"status", "ready"}, {"endpointsWithFreshMetrics", ready}}.dump(
                                  -1, ' ', false, kReplace)});
  }
  if (path == "/metrics") {
    if (method != "GET") return respond(error_reply(405, "method-not-allowed", "use GET"));
    return metrics(handlers_, std::move(respond));
  }
  if (path == "/admin/v1/drain") {
    // POST: stop admitting (202 while draining, 200 once drained); GET:
    // where it stands; DELETE: admit again.
    if (method != "GET" && method != "POST" && method != "DELETE")
      return respond(error_reply(405, "method-not-allowed", "use GET, POST or DELETE"));
    if (method == "POST" && !ctx_.draining.exchange(true))
      SLUICE_LOG(kInfo, "admin",
                 "drain: no longer admitting; queued and in-flight requests finish");
    if (method == "DELETE" && ctx_.shutting_down.load())
      return respond(
          error_reply(409, "shutting-down", "sluice is shutting down; it cannot admit again"));
    if (method == "DELETE" && ctx_.draining.exchange(false))
      SLUICE_LOG(kInfo, "admin", "drain ended: admitting again");
    return handlers_.on_dispatcher(
        [this, method](flowcontrol::Controller& c) {
          const std::size_t queued = c.queued();
          const std::size_t in_flight = ctx_.in_flight();
          const bool draining = ctx_.draining.load();
          const char* state = !draining                       ? "serving"
                              : queued == 0 && in_flight == 0 ? "drained"
                                                              : "draining";
          const int status = method == "POST" && std::string_view(state) == "draining" ? 202 : 200;
          return Reply{status,
                       json{{"state", state}, {"queued", queued}, {"inFlight", in_flight}}.dump(
                           -1, ' ', false, kReplace)};
        },
        std::move(respond));
  }
  if (path == "/admin/v1/reload") {
    if (method != "POST") return respond(error_reply(405, "method-not-allowed", "use POST"));
    backend_.reload([this, respond = std::move(respond)](ReloadResult r) mutable {
      Reply reply;
      if (!r.ok) {
        reply = error_reply(400, "invalid-config", r.error);
      } else {
        reply = Reply{200, json{{"status", "reloaded"},
                                {"applied", r.applied},
                                {"restartRequired", r.restart_needed}}
                               .dump(-1, ' ', false, kReplace)};
      }
      net::post(ioc_, [reply = std::move(reply), respond = std::move(respond)]() mutable {
        respond(std::move(reply));
      });
    });
    return;
  }
  if (path == "/admin/v1/fleet") {
    if (method != "GET") return respond(error_reply(405, "method-not-allowed", "use GET"));
    if (!fleet())
      return respond(Reply{200, json{{"enabled", false}}.dump(-1, ' ', false, kReplace)});
    const fleet::FleetStatus st = fleet()->status();
    json replicas = json::array();
    for (const auto& r : st.replicas)
      replicas.push_back(json{{"id", r.id},
                              {"address", r.address},
                              {"self", r.self},
                              {"lastSyncUnixMs", r.last_sync_unix_ms},
                              {"lagMs", r.lag_ms},
                              {"seq", r.seq}});
    json out{{"enabled", true},
             {"replicaId", st.replica_id},
             {"connected", st.connected},
             {"degraded", st.degraded},
             {"syncs", st.syncs},
             {"failures", st.failures},
             {"reconnects", st.reconnects},
             {"lastError", st.last_error},
             {"lastOkUnixMs", st.last_ok_unix_ms},
             {"lastSyncSeconds", st.last_sync_seconds},
             {"holds", st.holds},
             {"holdOverrides", st.hold_overrides},
             {"redisCommands", st.commands},
             {"operationsPublished", st.operations_published},
             {"operationsApplied", st.operations_applied},
             {"duplicateId", st.duplicate_id},
             {"duplicateIdSyncs", st.duplicate_id_syncs},
             {"replicas", std::move(replicas)}};
    return respond(Reply{200, out.dump(-1, ' ', false, kReplace)});
  }
  if (path == "/admin/v1/endpoints") {
    if (method != "GET") return respond(error_reply(405, "method-not-allowed", "use GET"));
    // At most ?limit= (default 1000), the longest queues first when capped;
    // x-total-count says how many there are.
    auto limit = limit_param(target, 1000, datalayer::EndpointSet::kMaxEndpoints);
    if (!limit)
      return respond(
          error_reply(400, "invalid-limit", "limit must be a whole number from 1 to 4096"));
    const auto now = datalayer::Clock::now();
    std::vector<std::size_t> order(ctx_.endpoints.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (order.size() > *limit) {
      // The loads read once: I/O threads change them meanwhile, and a sort
      // whose comparisons change under it is undefined behaviour.
      std::vector<double> load(order.size());
      for (std::size_t i = 0; i < load.size(); ++i) {
        const auto& ep = ctx_.endpoints.at(i);
        load[i] = static_cast<double>(ep.waiting.load()) + static_cast<double>(ep.in_flight.load());
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return load[a] > load[b]; });
      order.resize(*limit);
    }
    json out = json::array();
    for (std::size_t i : order) {
      const auto& ep = ctx_.endpoints.at(i);
      const auto at = ep.metrics_ns.load(std::memory_order_acquire);
      json e{{"address", ep.config.address},
             {"engine", ep.config.engine},
             {"labels", ep.config.labels},
             {"removed", ep.removed.load()},
             {"healthy", ep.usable(now)},
             {"inFlight", ep.in_flight.load()},
             {"connectFailures", ep.connect_failures.load()}};
      if (at != 0) {
        e["metrics"] = {
            {"waiting", ep.waiting.load()},
            {"running", ep.running.load()},
            {"kvCacheUsage", ep.kv_cache_usage.load()},
            {"ageMs", ms_since(datalayer::Clock::time_point(datalayer::Clock::duration(at)), now)}};
      } else {
        e["metrics"] = nullptr;
      }
      out.push_back(std::move(e));
    }
    Reply r{200, out.dump(-1, ' ', false, kReplace)};
    r.total = ctx_.endpoints.size();
    return respond(std::move(r));
  }
  if (path == "/admin/v1/bands") {
    if (method != "GET") return respond(error_reply(405, "method-not-allowed", "use GET"));
    return handlers_.on_dispatcher(
        [](flowcontrol::Controller& c) {
          json out = json::array();
          for (const auto& [p, b] : c.registry().bands()) out.push_back(band_json(*b, c));
          return Reply{200, out.dump(-1, ' ', false, kReplace)};
        },
        std::move(respond));
  }
  const std::string bands_prefix = "/admin/v1/bands/";
  if (path.rfind(bands_prefix, 0) == 0 && path.size() > bands_prefix.size()) {
    const std::string p = path.substr(bands_prefix.size());
    const auto parsed = parse_priority(p);
    if (!parsed)
      return respond(error_reply(400, "invalid-priority",
                                 "band priority must be a whole number written without leading "
                                 "zeros or a sign on 0, got '" +
                                     p + "'"));
    const int priority = *parsed;
    auto find = [priority](flowcontrol::Controller& c) -> registry::Band* {
      auto& bands = c.registry().bands();
      auto it = bands.find(priority);
      return it == bands.end() ? nullptr : it->second.get();
    };
    if (method == "GET") {
      return handlers_.on_dispatcher(
          [find, priority](flowcontrol::Controller& c) {
            registry::Band* b = find(c);
            if (!b)
              return error_reply(404, "unknown-band",
                                 "no band with priority " + std::to_string(priority));
            return Reply{200, band_json(*b, c).dump(-1, ' ', false, kReplace)};
          },
          std::move(respond));
    }
    if (method == "PUT") {
      return handlers_.on_dispatcher(
          [find, priority, body](flowcontrol::Controller& c) {
            registry::Band* b = find(c);
            registry::BandConfig bc = b ? b->config() : c.registry().config().default_band;
            bc.priority = priority;
            Reply error;
            if (!parse_band(body, bc, error)) return error;
            c.registry().set_band(bc, flowcontrol::Clock::now());
            SLUICE_LOG(kInfo, "admin", "band " << priority << (b ? " changed" : " added"));
            return Reply{200, band_json(*find(c), c).dump(-1, ' ', false, kReplace)};
          },
          std::move(respond));
    }
    if (method == "DELETE") {
      return handlers_.on_dispatcher(
          [find, priority](flowcontrol::Controller& c) {
            registry::Band* b = find(c);
            if (!b || !b->configured())
              return error_reply(404, "unknown-band",
                                 "no configured band with priority " + std::to_string(priority));
            c.registry().remove_band(priority, flowcontrol::Clock::now());
            SLUICE_LOG(
                kInfo, "admin",
                "band " << priority
                        << " removed; its queued requests stay, under the default band's settings");
            return Reply{200, json{{"priority", priority}, {"removed", true}}.dump(-1, ' ', false,
                                                                                   kReplace)};
          },
          std::move(respond));
    }
    return respond(error_reply(405, "method-not-allowed", "use GET, PUT or DELETE"));
  }
  if (path == "/admin/v1/flows") {
    if (method != "GET") return respond(error_reply(405, "method-not-allowed", "use GET"));
    // The busiest flows first (queued, then in flight), at most ?limit=
    // (default 1000); x-total-count says how many there are.
    auto limit = limit_param(target, 1000, 1000000);
    if (!limit)
      return respond(
          error_reply(400, "invalid-limit", "limit must be a whole number from 1 to 1000000"));
    return handlers_.with_flows(
        [n = *limit, respond = std::move(respond)](std::shared_ptr<const FlowsSnapshot> snap) {
          std::vector<const registry::FlowSummary*> order;
          order.reserve(snap->flows.size());
          for (const auto& f : snap->flows) order.push_back(&f);
          auto busier = [](const registry::FlowSummary* a, const registry::FlowSummary* b) {
            if (a->queued != b->queued) return a->queued > b->queued;
            if (a->in_flight != b->in_flight) return a->in_flight > b->in_flight;
            if (a->id != b->id) return a->id < b->id;
            return a->priority > b->priority;
          };
          const std::size_t shown = std::min(n, order.size());
          std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown),
                            order.end(), busier);
          json out = json::array();
          for (std::size_t i = 0; i < shown; ++i)
            out.push_back(flow_json(*order[i], snap->prices, snap->taken));
          Reply r{200, out.dump(-1, ' ', false, kReplace)};
          r.total = snap->flows.size();
          respond(std::move(r));
        });
  }
  const std::string flows_prefix = "/admin/v1/flows/";
  if (path.rfind(flows_prefix, 0) == 0 && path.size() > flows_prefix.size()) {
    const std::string id = path.substr(flows_prefix.size());
    if (method == "GET") {
      return handlers_.on_dispatcher(
          [id](flowcontrol::Controller& c) {
            const auto& ov = c.registry().overrides();
            auto it = ov.find(id);
            json flows = flows_json(c, id);
            if (flows.empty() && it == ov.end() && !c.registry().has_configured_weight(id))
              return error_reply(404, "unknown-flow", "no flow '" + id + "'");
            return Reply{
                200, json{{"id", id},
                          {"override", it == ov.end() ? json::object() : override_json(it->second)},
                          {"flows", flows}}
                         .dump(-1, ' ', false, kReplace)};
          },
          std::move(respond));
    }
    if (method == "PUT") {
      return handlers_.on_dispatcher(
          [id, body, replicated](flowcontrol::Controller& c) {
            auto& reg = c.registry();
            const auto& ov = reg.overrides();
            auto it = ov.find(id);
            // From another replica: the flow may not have reached this one yet.
            if (!replicated && flows_json(c, id).empty() && it == ov.end() &&
                !reg.has_configured_weight(id))
              return error_reply(404, "unknown-flow", "no flow '" + id + "'");
            Reply error;
            auto o =
                parse_override(body, it == ov.end() ? registry::FlowOverride{} : it->second, error);
            if (!o) return error;
            reg.set_flow_override(id, *o, flowcontrol::Clock::now());
            SLUICE_LOG(kInfo, "admin",
                       "flow " << id << " override set: "
                               << override_json(*o).dump(-1, ' ', false, kReplace));
            return Reply{
                200, json{{"id", id}, {"override", override_json(*o)}, {"flows", flows_json(c, id)}}
                         .dump(-1, ' ', false, kReplace)};
          },
          std::move(respond));
    }
    if (method == "DELETE") {
      return handlers_.on_dispatcher(
          [id](flowcontrol::Controller& c) {
            auto& reg = c.registry();
            if (!reg.overrides().count(id))
              return error_reply(404, "unknown-flow", "flow '" + id + "' has no override");
            reg.clear_flow_override(id, flowcontrol::Clock::now());
            SLUICE_LOG(kInfo, "admin", "flow " << id << " override removed");
            return Reply{
                200,
                json{{"id", id}, {"override", json::object()}, {"flows", flows_json(c, id)}}.dump(
                    -1, ' ', false, kReplace)};
          },
          std::move(respond));
    }
    return respond(error_reply(405, "method-not-allowed", "use GET, PUT or DELETE"));
  }
  respond(error_reply(404, "not-found", "no such admin path: " + path));
}

}  // namespace sluice::admin

#include "admin/admin_server.h"

#include <pthread.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "admin/auth.h"
#include "admin/routes.h"
#include "config/units.h"
#include "fleet/fleet_sync.h"
#include "observe/log.h"
#include "proxy/proxy_context.h"

namespace sluice::admin {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Reply = AdminServer::Reply;

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
  std::string_view param;
  // With a token, every route needs it but the open ones (Access in
  // routes.cc), unknown paths too.
  if (!token_.empty() && !is_open(find_route(path, param), ctx_.config.server.admin_open_metrics) &&
      !bearer_matches(authorization, token_))
    return respond(
        error_reply(401, "unauthorized", "this call needs Authorization: Bearer <admin token>"));
  route(method, target, body, std::move(respond), false);
}

namespace {

// The admin answer's typed error ({"error": {"code", "message"}}) as the
// fleet keeps it.
fleet::RefusedOperation refused_operation(const std::string& method, const std::string& target,
                                          const Reply& r) {
  fleet::RefusedOperation out{method, target, r.status, "", "", 0};
  const auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const auto& e = j["error"];
    if (e.contains("code") && e["code"].is_string()) out.code = e["code"].get<std::string>();
    if (e.contains("message") && e["message"].is_string())
      out.message = e["message"].get<std::string>();
  }
  out.at_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return out;
}

}  // namespace

// A refusal is logged, counted and kept for /admin/v1/fleet: the replicas
// no longer hold the same changes, which an operator must see.
void AdminServer::apply_replicated(const FleetOperationView& op) {
  net::post(ioc_, [this, method = op.method, target = op.target, body = op.body] {
    route(
        method, target, body,
        [this, method, target](Reply r) {
          if (r.status >= 300) {
            SLUICE_LOG(kWarn, "fleet",
                       "a change made through another replica ("
                           << method << " " << target << ") failed here: " << r.status << " "
                           << r.body);
            if (fleet()) fleet()->note_operation_refused(refused_operation(method, target, r));
          } else {
            SLUICE_LOG(
                kInfo, "fleet",
                "applied a change made through another replica: " << method << " " << target);
          }
        },
        true);
  });
}

void AdminServer::route(const std::string& method, const std::string& target,
                        const std::string& body, std::function<void(Reply)> respond,
                        bool replicated) {
  const std::string path = target.substr(0, target.find('?'));
  std::string_view param;
  const Route* r = find_route(path, param);
  if (!r) return respond(error_reply(404, "not-found", "no such admin path: " + path));
  if (r->check)
    if (auto error = r->check(param)) return respond(std::move(*error));
  const MethodRoute* m = find_method(*r, method);
  if (!m) return respond(error_reply(405, "method-not-allowed", allowed_methods(*r)));
  if (!replicated && fleet() && is_fleet_wide(*m, target)) {
    // Applied here first; stored for the others once it succeeded.
    respond = [this, method, target, body, respond = std::move(respond)](Reply reply) {
      if (reply.status >= 200 && reply.status < 300)
        fleet()->publish_operation(fleet::FleetOperation{method, target, body});
      respond(std::move(reply));
    };
  }
  m->handler(handlers_, Request{method, target, path, param, body, replicated}, std::move(respond));
}

}  // namespace sluice::admin

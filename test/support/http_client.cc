#include "support/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

namespace sluice::test {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpClient::Impl {
  net::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buffer;
};

HttpClient::HttpClient(std::string host, std::uint16_t port, std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout), impl_(std::make_unique<Impl>()) {}

HttpClient::~HttpClient() { close(); }

void HttpClient::close() {
  beast::error_code ec;
  impl_->socket.close(ec);
  impl_->buffer.clear();
}

bool HttpClient::ensure_connected(std::string& error) {
  if (impl_->socket.is_open()) return true;
  beast::error_code ec;
  tcp::endpoint ep(net::ip::make_address(host_), port_);
  impl_->socket.connect(ep, ec);
  if (ec) {
    error = "connect: " + ec.message();
    impl_->socket.close(ec);
    return false;
  }
  ++connections_;
  // Blocking reads and writes give up after the timeout.
  timeval tv{static_cast<time_t>(timeout_.count() / 1000),
             static_cast<suseconds_t>((timeout_.count() % 1000) * 1000)};
  setsockopt(impl_->socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(impl_->socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  impl_->socket.set_option(tcp::no_delay(true));
  return true;
}

namespace {

http::request<http::string_body> make_request(const std::string& method, const std::string& target,
                                              const std::string& host, const std::string& body,
                                              const Headers& headers) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, host);
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  if (!body.empty() || method == "POST" || method == "PUT") req.prepare_payload();
  return req;
}

template <class Message>
void copy_head(const Message& m, Response& out) {
  out.status = static_cast<int>(m.result_int());
  for (const auto& f : m) {
    std::string name(f.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(f.value());
  }
}

}  // namespace

Response HttpClient::request(const std::string& method, const std::string& target,
                             const std::string& body, const Headers& headers) {
  Response out;
  if (!ensure_connected(out.error)) return out;
  auto req = make_request(method, target, host_, body, headers);
  beast::error_code ec;
  http::write(impl_->socket, req, ec);
  if (ec) {
    out.error = "write: " + ec.message();
    close();
    return out;
  }
  // Interim (1xx) responses are skipped, as an HTTP client does; the final
  // response is the answer.
  std::optional<http::response_parser<http::string_body>> parser;
  do {
    parser.emplace();
    parser->body_limit(64u << 20);
    // A read interrupted by a signal resumes where it stopped (the parser
    // keeps its state), as a restartable syscall would.
    do {
      ec = {};
      http::read(impl_->socket, impl_->buffer, *parser, ec);
    } while (ec == net::error::interrupted);
    if (ec) {
      out.error = "read: " + ec.message();
      close();
      return out;
    }
  } while (parser->get().result_int() / 100 == 1);
  auto& res = parser->get();
  copy_head(res, out);
  out.body = res.body();
  if (!res.keep_alive()) close();
  return out;
}

StreamResult HttpClient::stream(
    const std::string& target, const std::string& body, const Headers& headers,
    const std::function<bool(const Response& head, const SseEvent&)>& on_event) {
  StreamResult out;
  if (!ensure_connected(out.error)) return out;
  Headers h = headers;
  h.emplace_back("Content-Type", "application/json");
  auto req = make_request("POST", target, host_, body, h);
  beast::error_code ec;
  out.sent_at = Clock::now();
  http::write(impl_->socket, req, ec);
  if (ec) {
    out.error = "write: " + ec.message();
    close();
    return out;
  }
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  http::read_header(impl_->socket, impl_->buffer, parser, ec);
  if (ec) {
    out.error = "read header: " + ec.message();
    close();
    return out;
  }
  copy_head(parser.get(), out.head);
  std::string pending;
  char buf[8192];
  while (!parser.is_done()) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    http::read_some(impl_->socket, impl_->buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      out.error = "read body: " + ec.message();
      close();
      return out;
    }
    pending.append(buf, sizeof buf - parser.get().body().size);
    auto now = Clock::now();
    std::size_t pos;
    while ((pos = pending.find("\n\n")) != std::string::npos) {
      std::string event = pending.substr(0, pos);
      pending.erase(0, pos + 2);
      if (event.rfind("data: ", 0) == 0) {
        out.events.push_back({event.substr(6), now});
        if (on_event && !on_event(out.head, out.events.back())) {
          close();
          return out;
        }
      }
    }
  }
  out.complete = true;
  if (!parser.get().keep_alive()) close();
  return out;
}

RawConnection::RawConnection(const std::string& host, std::uint16_t port, int receive_buffer,
                             const std::string& local_host) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (receive_buffer > 0)
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  if (!local_host.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, local_host.c_str(), &local.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

std::uint16_t RawConnection::local_port() const {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (fd_ < 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  return ntohs(addr.sin_port);
}

long tcp_send_queue(std::uint16_t local_port, std::uint16_t remote_port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    // "  N: LOCAL_HEX_IP:PORT REMOTE_HEX_IP:PORT ST TX_QUEUE:RX_QUEUE ..."
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues;
    if (!(fields >> slot >> local >> remote >> state >> queues)) continue;
    auto port_of = [](const std::string& a) {
      const auto colon = a.rfind(':');
      return colon == std::string::npos ? 0ul : std::stoul(a.substr(colon + 1), nullptr, 16);
    };
    if (port_of(local) != local_port || port_of(remote) != remote_port) continue;
    return static_cast<long>(std::stoul(queues.substr(0, queues.find(':')), nullptr, 16));
  }
  return -1;
}

bool tcp_send_buffer_full(std::uint16_t local_port, std::uint16_t remote_port) {
  const std::string command = "ss -tmin '( sport = :" + std::to_string(local_port) +
                              " and dport = :" + std::to_string(remote_port) + " )' 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return false;
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  ::pclose(pipe);
  // skmem:(r0,rb131072,t0,tb3939840,f2176,w3942272,o0,bl0,d0)
  auto field = [&](const char* name) -> long long {
    const auto at = text.find(std::string(",") + name);
    if (at == std::string::npos) return -1;
    return std::atoll(text.c_str() + at + 1 + std::strlen(name));
  };
  const long long queued = field("w"), size = field("tb");
  return queued > 0 && size > 0 && queued >= size;
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawConnection::send(const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

std::string RawConnection::read_until_close(std::chrono::milliseconds timeout, bool* closed) {
  std::string out;
  auto deadline = Clock::now() + timeout;
  *closed = false;
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return out;
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) <= 0) return out;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      *closed = true;
      return out;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}

std::vector<double> scrape_metrics(const std::string& host, std::uint16_t port,
                                   const std::vector<std::string>& names) {
  std::vector<double> values(names.size(), -1);
  std::vector<char> found(names.size(), 0);
  HttpClient client(host, port);
  auto res = client.request("GET", "/metrics");
  std::istringstream in(res.body);
  std::string line;
  while (std::getline(in, line)) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i];
      if (!found[i] && line.rfind(name, 0) == 0 && line.size() > name.size() &&
          (line[name.size()] == ' ' || line[name.size()] == '{')) {
        values[i] = std::stod(line.substr(line.rfind(' ') + 1));
        found[i] = 1;
      }
    }
  }
  return values;
}

double scrape_metric(const std::string& host, std::uint16_t port, const std::string& name) {
  return scrape_metrics(host, port, {name})[0];
}

}  // namespace sluice::test

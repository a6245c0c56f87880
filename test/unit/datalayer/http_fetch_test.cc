// http_get against servers of the test's own on 127.0.0.1 (port 0), HTTP
// and HTTPS, all on one io_context run on the test thread for a bounded
// time: answers of every framing, refusals, limits, a server that never
// answers, garbage, TLS verification (certificates made with the openssl
// command in a temporary directory). And parse_url.
#include "datalayer/http_fetch.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "datalayer/upstream_tls.h"
#include "support/requires.h"

extern char** environ;

namespace sluice::datalayer {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---- parse_url ----

TEST(ParseUrl, AcceptsHttpAndHttpsWithNamesAddressesAndPorts) {
  Url u;
  ASSERT_TRUE(parse_url("http://example.com/jwks.json", u));
  EXPECT_FALSE(u.https);
  EXPECT_EQ(u.host, "example.com");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.target, "/jwks.json");

  ASSERT_TRUE(parse_url("https://Login.Example.COM", u));
  EXPECT_TRUE(u.https);
  EXPECT_EQ(u.host, "login.example.com");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.target, "/");

  ASSERT_TRUE(parse_url("HTTPS://127.0.0.1:8443/a/b?c=d&e", u));
  EXPECT_TRUE(u.https);
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8443);
  EXPECT_EQ(u.target, "/a/b?c=d&e");

  ASSERT_TRUE(parse_url("https://[::1]:8443/x?y", u));
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 8443);
  EXPECT_EQ(u.target, "/x?y");

  ASSERT_TRUE(parse_url("http://[2001:DB8::1]/", u));
  EXPECT_EQ(u.host, "2001:db8::1");
  EXPECT_EQ(u.port, 80);

  ASSERT_TRUE(parse_url("http://h:65535?q=1", u));
  EXPECT_EQ(u.host, "h");
  EXPECT_EQ(u.port, 65535);
  EXPECT_EQ(u.target, "/?q=1");

  ASSERT_TRUE(parse_url("http://keycloak_1.auth-ns.svc:8080/realms/x/certs", u));
  EXPECT_EQ(u.host, "keycloak_1.auth-ns.svc");
}

TEST(ParseUrl, RefusesEverythingElse) {
  for (const char* bad : {
           "",
           "http://",
           "http:///path",
           "http://h:0/",
           "http://h:70000/",
           "http://h:65536/",
           "http://h:/",
           "http://h:8a/",
           "http://h:+80/",
           "http://h:080808/",
           "ftp://h/",
           "file:///etc/passwd",
           "h/path",
           "//h/path",
           "http:/h/",
           "http://user@h/",
           "http://user:pass@h/",
           "http://h/path#frag",
           "http://h/#",
           "http://h/a b",
           "http://h /",
           "http://h/\r\nX: y",
           "http://h/\x7f",
           "http://h/\xc3\xa9",
           "http://h\t/",
           "http://[::1/",
           "http://[::1]x/",
           "http://[::1]:/",
           "http://[not-v6]/",
           "http://[fe80::1%25eth0]/",
           "http://::1/",
           "http://h:1:2/",
           "http://a..b/",
           "http://.a/",
           "http://a./",
           "http://127.1/",
           "http://1.2.3.4.5/",
           "http://a$b/",
           "http://a%62/",
       }) {
    Url u;
    EXPECT_FALSE(parse_url(bad, u)) << "accepted: " << bad;
  }
  // A refusal leaves `out` as it was.
  Url u;
  u.host = "kept";
  EXPECT_FALSE(parse_url("http://h:0/", u));
  EXPECT_EQ(u.host, "kept");
}

// ---- servers of the test's own ----

// What a server does with each connection.
struct Script {
  std::string response;         // written after the request head (or at once)
  bool answer_at_once = false;  // write without reading a request first
  bool hang = false;            // read the request, then never answer
  bool close_notify = true;     // TLS: end with close_notify (false: the TCP close only)
  int send_buffer = 64 << 10;   // SO_SNDBUF: keeps what the kernel buffers for a big answer small
};

// Serves `script` to every connection on 127.0.0.1:0, plain or TLS, on the
// test's io_context; records what happened. stop() closes the acceptor and
// every connection.
class TestServer {
 public:
  TestServer(net::io_context& ioc, Script script, ssl::context* tls = nullptr)
      : script_(std::move(script)), tls_(tls), acceptor_(ioc) {
    error_code ec;
    tcp::endpoint at(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(at.protocol(), ec);
    if (!ec) acceptor_.bind(at, ec);
    if (!ec) acceptor_.listen(16, ec);
    EXPECT_FALSE(ec) << ec.message();
    if (ec) return;
    port_ = acceptor_.local_endpoint(ec).port();
    accept();
  }
  ~TestServer() { stop(); }

  std::uint16_t port() const { return port_; }
  void stop() {
    error_code ignored;
    acceptor_.close(ignored);
    for (auto& close : closers_) close();
    closers_.clear();
  }

  int connections = 0;
  std::string request;          // the last request head read
  std::string sni;              // TLS: the name the client sent ("" if none)
  std::string handshake_error;  // TLS: why the server's handshake failed
  bool write_finished = false;
  error_code write_error;
  std::size_t written = 0;

 private:
  template <class Stream>
  class Connection;

  void accept();

  Script script_;
  ssl::context* tls_;
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::vector<std::function<void()>> closers_;
};

template <class Stream>
class TestServer::Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(TestServer& server, Stream stream) : server_(server), stream_(std::move(stream)) {}

  void start() {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      after_handshake();
    } else {
      stream_.async_handshake(
          ssl::stream_base::server, [self = this->shared_from_this()](const error_code& ec) {
            if (ec) {
              self->server_.handshake_error = ec.message();
              return self->close();
            }
            const char* name =
                SSL_get_servername(self->stream_.native_handle(), TLSEXT_NAMETYPE_host_name);
            self->server_.sni = name ? name : "";
            self->after_handshake();
          });
    }
  }

  void close() {
    error_code ignored;
    lowest().close(ignored);
  }

 private:
  tcp::socket& lowest() {
    if constexpr (std::is_same_v<Stream, tcp::socket>)
      return stream_;
    else
      return stream_.next_layer();
  }

  void after_handshake() {
    if (server_.script_.answer_at_once) return answer();
    net::async_read_until(stream_, net::dynamic_buffer(in_, 64 << 10), "\r\n\r\n",
                          [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                            if (ec) return self->close();
                            self->server_.request = self->in_.substr(0, n);
                            if (self->server_.script_.hang) return self->drain();
                            self->answer();
                          });
  }

  void answer() {
    net::async_write(stream_, net::buffer(server_.script_.response),
                     [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                       self->server_.write_finished = true;
                       self->server_.write_error = ec;
                       self->server_.written = n;
                       if (ec) return self->close();
                       self->end();
                     });
  }

  // The answer is out: TLS says close_notify (or not), plain TCP half-closes;
  // then whatever the client still sends is read until it closes.
  void end() {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      error_code ignored;
      stream_.shutdown(tcp::socket::shutdown_send, ignored);
      drain();
    } else {
      if (!server_.script_.close_notify) return close();
      stream_.async_shutdown(
          [self = this->shared_from_this()](const error_code&) { self->close(); });
    }
  }

  void drain() {
    lowest().async_read_some(net::buffer(scratch_),
                             [self = this->shared_from_this()](const error_code& ec, std::size_t) {
                               if (ec) return self->close();
                               self->drain();
                             });
  }

  TestServer& server_;
  Stream stream_;
  std::string in_;
  char scratch_[4096];
};

void TestServer::accept() {
  acceptor_.async_accept([this](const error_code& ec, tcp::socket socket) {
    if (ec) return;
    ++connections;
    error_code ignored;
    socket.set_option(net::socket_base::send_buffer_size(script_.send_buffer), ignored);
    if (tls_) {
      auto c = std::make_shared<Connection<ssl::stream<tcp::socket>>>(
          *this, ssl::stream<tcp::socket>(std::move(socket), *tls_));
      closers_.push_back([weak = std::weak_ptr(c)] {
        if (auto c = weak.lock()) c->close();
      });
      c->start();
    } else {
      auto c = std::make_shared<Connection<tcp::socket>>(*this, std::move(socket));
      closers_.push_back([weak = std::weak_ptr(c)] {
        if (auto c = weak.lock()) c->close();
      });
      c->start();
    }
    accept();
  });
}

// ---- the fixture: one io_context, run on the test thread ----

class HttpFetch : public ::testing::Test {
 protected:
  // Starts a GET of `url` and runs the context until `done` came (at most
  // `limit`); then stops every server and runs the context until it has no
  // work left, so a second call of `done` would be seen. The result, or a
  // failed assertion.
  FetchResult fetch(const std::string& url, const FetchOptions& options = {},
                    std::chrono::milliseconds limit = 10s, bool must_drain = true) {
    int calls = 0;
    FetchResult result;
    http_get(ioc_, url, options, [&](FetchResult r) {
      ++calls;
      result = std::move(r);
    });
    EXPECT_EQ(calls, 0) << "done ran inside http_get";
    EXPECT_TRUE(run_until([&] { return calls > 0; }, limit)) << "no answer within the limit";
    finish(must_drain);
    EXPECT_EQ(calls, 1) << "done ran " << calls << " times";
    return result;
  }

  // Runs the context until `pred` holds or `limit` passed.
  template <class Pred>
  bool run_until(Pred pred, std::chrono::milliseconds limit = 10s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      if (ioc_.run_one_until(deadline) == 0 && ioc_.stopped()) {
        ioc_.restart();
        return pred();  // out of work: nothing more can happen
      }
    }
    return true;
  }

  // Stops the servers and runs what is left (bounded): every operation of
  // the fetch must end, leaving the context without work.
  void finish(bool must_drain = true) {
    for (auto& s : servers_) s->stop();
    ioc_.restart();
    ioc_.run_for(5s);
    if (must_drain) {
      EXPECT_TRUE(ioc_.stopped()) << "work left on the context after the fetch";
    }
    ioc_.restart();
  }

  TestServer& serve(Script script, ssl::context* tls = nullptr) {
    servers_.push_back(std::make_unique<TestServer>(ioc_, std::move(script), tls));
    return *servers_.back();
  }
  static std::string url(const TestServer& s, const std::string& path = "/jwks") {
    return "http://127.0.0.1:" + std::to_string(s.port()) + path;
  }

  net::io_context ioc_{1};
  std::vector<std::unique_ptr<TestServer>> servers_;
};

const std::string kJwks = R"({"keys":[{"kty":"oct","k":"c2VjcmV0"}]})";

std::string ok_with_length(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// ---- HTTP ----

TEST_F(HttpFetch, ContentLengthAnswerAndTheRequestItCameFor) {
  auto& s = serve({ok_with_length(kJwks)});
  auto r = fetch(url(s, "/realms/x/certs?a=1"));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kJwks);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(s.connections, 1);
  EXPECT_EQ(s.request.rfind("GET /realms/x/certs?a=1 HTTP/1.1\r\n", 0), 0u) << s.request;
  EXPECT_TRUE(contains(s.request, "\r\nHost: 127.0.0.1:" + std::to_string(s.port()) + "\r\n"))
      << s.request;
  EXPECT_TRUE(contains(s.request, "\r\nConnection: close\r\n")) << s.request;
  EXPECT_TRUE(contains(s.request, "\r\nAccept: application/json\r\n")) << s.request;
  EXPECT_TRUE(contains(s.request, "\r\nUser-Agent: sluice\r\n")) << s.request;
}

TEST_F(HttpFetch, ChunkedAnswer) {
  auto& s =
      serve({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"});
  auto r = fetch(url(s));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, "hello world");
}

TEST_F(HttpFetch, CloseDelimitedAnswer) {
  auto& s = serve({"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + kJwks});
  auto r = fetch(url(s));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, kJwks);
}

TEST_F(HttpFetch, EmptyAnswer) {
  auto& s = serve({"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"});
  auto r = fetch(url(s));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, "");
}

TEST_F(HttpFetch, ANameIsResolvedAsynchronously) {
  auto& s = serve({ok_with_length(kJwks)});
  auto r = fetch("http://localhost:" + std::to_string(s.port()) + "/jwks");
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, kJwks);
  EXPECT_TRUE(contains(s.request, "\r\nHost: localhost:" + std::to_string(s.port()) + "\r\n"))
      << s.request;
}

TEST_F(HttpFetch, NotFoundIsAnErrorWithItsStatusAndWithoutTheBody) {
  auto& s = serve({"HTTP/1.1 404 Not Found\r\nContent-Length: 11\r\n\r\nsecret-body"});
  auto r = fetch(url(s));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.error, "HTTP 404");
  EXPECT_EQ(r.body, "");
  EXPECT_FALSE(contains(r.error, "secret-body"));
}

TEST_F(HttpFetch, OtherSuccessStatusesAreErrorsToo) {
  auto& s = serve({"HTTP/1.1 204 No Content\r\n\r\n"});
  auto r = fetch(url(s));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.error, "HTTP 204");
}

TEST_F(HttpFetch, RedirectIsNotFollowedAndTheErrorNamesTheLocation) {
  auto& s =
      serve({"HTTP/1.1 301 Moved Permanently\r\nLocation: https://elsewhere.example/jwks\r\n"
             "Content-Length: 0\r\n\r\n"});
  auto r = fetch(url(s));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, 301);
  EXPECT_TRUE(contains(r.error, "Location https://elsewhere.example/jwks")) << r.error;
  EXPECT_EQ(s.connections, 1);  // nothing followed it
}

TEST_F(HttpFetch, BodyOverTheLimitIsTooLargeAndNotReadToItsEnd) {
  const std::size_t ten_mib = 10u << 20;
  for (bool announced : {false, true}) {
    SCOPED_TRACE(announced ? "Content-Length" : "close-delimited");
    std::string head =
        announced ? "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(ten_mib) + "\r\n\r\n"
                  : std::string("HTTP/1.1 200 OK\r\n\r\n");
    auto& s = serve({head + std::string(ten_mib, 'x')});
    int calls = 0;
    FetchResult r;
    http_get(ioc_, url(s), {}, [&](FetchResult got) {
      ++calls;
      r = std::move(got);
    });
    // The server's write of its 10 MiB ends too: in an error, as the
    // client closed with most of it unread.
    ASSERT_TRUE(run_until([&] { return calls > 0 && s.write_finished; }));
    finish();
    EXPECT_EQ(calls, 1);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(contains(r.error, "too large")) << r.error;
    EXPECT_EQ(r.body, "");
    EXPECT_TRUE(s.write_error) << "the client read all " << s.written << " bytes";
    EXPECT_LT(s.written, head.size() + ten_mib);
    servers_.clear();
  }
}

TEST_F(HttpFetch, BodyAtTheLimitIsRead) {
  FetchOptions o;
  o.max_body_bytes = 1000;
  auto& s = serve({"HTTP/1.1 200 OK\r\n\r\n" + std::string(1000, 'y')});
  auto r = fetch(url(s), o);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body.size(), 1000u);
  auto& chunked = serve({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n" +
                         std::string(1001, 'y') + "\r\n0\r\n\r\n"});
  r = fetch(url(chunked), o);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "too large")) << r.error;
}

TEST_F(HttpFetch, HeaderOverTheLimit) {
  auto& s = serve({"HTTP/1.1 200 OK\r\nX-Padding: " + std::string(20 << 10, 'a') +
                   "\r\nContent-Length: 2\r\n\r\n{}"});
  auto r = fetch(url(s));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "header too large")) << r.error;

  FetchOptions o;
  o.max_header_bytes = 64;
  auto& small = serve({"HTTP/1.1 200 OK\r\nX-Padding: " + std::string(100, 'a') +
                       "\r\nContent-Length: 2\r\n\r\n{}"});
  r = fetch(url(small), o);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "header too large")) << r.error;
}

TEST_F(HttpFetch, ServerThatNeverAnswersTimesOut) {
  auto& s = serve({.hang = true});
  FetchOptions o;
  o.timeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  auto r = fetch(url(s), o, 5s);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.error.rfind("timed out", 0), 0u) << r.error;
  EXPECT_TRUE(contains(r.error, "reading the response")) << r.error;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
  EXPECT_FALSE(s.request.empty());  // the request went out; the answer never came
}

TEST_F(HttpFetch, ConnectionRefused) {
  std::uint16_t port;
  {
    tcp::acceptor a(ioc_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  auto r = fetch("http://127.0.0.1:" + std::to_string(port) + "/");
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "connecting to 127.0.0.1:" + std::to_string(port))) << r.error;
}

TEST_F(HttpFetch, GarbageInsteadOfHttp) {
  for (const char* garbage : {
           "SSH-2.0-OpenSSH_9.2\r\n\r\n",
           "HTTP/1.1 2000 OK\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
           "\r\n\r\n",
       }) {
    SCOPED_TRACE(garbage);
    auto& s = serve({garbage});
    auto r = fetch(url(s));
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.error.empty());
    servers_.clear();
  }
}

TEST_F(HttpFetch, ClosedBeforeOrDuringTheAnswer) {
  auto& nothing = serve({""});
  auto r = fetch(url(nothing));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "connection closed before a response");
  auto& half = serve({"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"});
  r = fetch(url(half));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.error, "connection closed mid-response");
  EXPECT_EQ(r.body, "");
}

TEST_F(HttpFetch, NotAUrlIsAnErrorOnTheContextsThread) {
  auto r = fetch("ftp://127.0.0.1/jwks");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "not a valid http:// or https:// URL");
}

TEST_F(HttpFetch, UnresolvableNameIsAnError) {
  // A name under .invalid never resolves (RFC 6761) and is refused before
  // any query: the answer does not depend on the host's resolver or
  // network (in upper case it is the same name).
  for (const std::string host : {"no-such-host.invalid", "NO-SUCH-HOST.Invalid", "invalid"}) {
    SCOPED_TRACE(host);
    FetchOptions o;
    o.timeout = 10s;
    const auto start = std::chrono::steady_clock::now();
    auto r = fetch("http://" + host + "/jwks", o, 10s);
    EXPECT_FALSE(r.ok);
    std::string lower = host;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(r.error, "resolving " + lower + ": no such name (.invalid is never looked up)");
    // At once: no name server was asked (one would take its timeout).
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  }
}

// ---- the largest allocation while a fetch runs ----

// Under a sanitizer its allocator's hook sees every malloc; otherwise the
// test's own operator new (every new and new[] of libstdc++ goes through it).
std::atomic<bool> g_watching{false};
std::atomic<std::size_t> g_largest{0};

void note_allocation(std::size_t n) {
  if (!g_watching.load(std::memory_order_relaxed)) return;
  std::size_t seen = g_largest.load(std::memory_order_relaxed);
  while (n > seen && !g_largest.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLUICE_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SLUICE_SANITIZER_ALLOCATOR 1
#endif
#endif

#ifdef SLUICE_SANITIZER_ALLOCATOR
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*,
                                                                             std::size_t),
                                                         void (*free_hook)(const volatile void*));
void malloc_hook(const volatile void*, std::size_t n) { note_allocation(n); }
void free_hook(const volatile void*) {}
void install_allocation_hook() {
  static bool installed = __sanitizer_install_malloc_and_free_hooks(malloc_hook, free_hook) != 0;
  (void)installed;
}
#else
void install_allocation_hook() {}  // the operator new at the end of this file
#endif

class LargestAllocation {
 public:
  LargestAllocation() {
    install_allocation_hook();
    g_largest = 0;
    g_watching = true;
  }
  ~LargestAllocation() { g_watching = false; }
  std::size_t bytes() const { return g_largest.load(); }
};

TEST_F(HttpFetch, HugeAnnouncedLengthIsRefusedWithoutReservingIt) {
  FetchOptions o;
  o.max_body_bytes = 64u << 10;
  const std::size_t bound = o.max_body_bytes + o.max_header_bytes + (128u << 10);
  for (std::uint64_t announced :
       {std::uint64_t{1000000000000000}, std::uint64_t{500} << 20, std::uint64_t{64u << 10} + 1}) {
    SCOPED_TRACE(announced);
    auto& s =
        serve({"HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(announced) + "\r\n\r\nabc"});
    FetchResult r;
    std::size_t largest;
    {
      LargestAllocation watch;
      r = fetch(url(s), o);
      largest = watch.bytes();
    }
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(contains(r.error, "too large")) << r.error;
    EXPECT_LT(largest, bound);
    servers_.clear();
  }
  // At the limit a reserve of the announced length is allowed: then the
  // peer closes after a few bytes.
  auto& s = serve({"HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n\r\nabc"});
  LargestAllocation watch;
  auto r = fetch(url(s), o);
  EXPECT_EQ(r.error, "connection closed mid-response");
  EXPECT_LT(watch.bytes(), bound);
  EXPECT_GE(watch.bytes(), 65536u) << "the allocation watch saw nothing";
}

// ---- HTTPS ----

// /bin/sh -c `cmd` through posix_spawn (a fork-free start); its exit code.
int run_command(const std::string& cmd) {
  pid_t pid;
  std::string c = cmd;
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char* argv[] = {sh, dash_c, c.data(), nullptr};
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv, environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A test PKI made with the openssl command in a fresh directory, once for
// the suite: a CA and a server certificate it signed (IP:127.0.0.1,
// DNS:localhost), another CA with nothing to do with it, and a server
// certificate of the first CA for DNS:other.example only. ECDSA P-256.
class Pki {
 public:
  Pki() {
    char tmpl[] = "/tmp/sluice-http-fetch-XXXXXX";
    if (!mkdtemp(tmpl)) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    if (run_command("openssl version >/dev/null 2>&1") != 0) {
      error_ = "the openssl command is missing (Debian: apt-get install openssl)";
      return;
    }
    std::string log = " 2>>" + path("openssl.log") + " >&2";
    for (const std::string& step : {
             ca("ca"),
             ca("other-ca"),
             leaf("server", "localhost", "IP:127.0.0.1,DNS:localhost"),
             leaf("other", "other.example", "DNS:other.example"),
         }) {
      if (run_command("cd " + dir_ + " && (" + step + ")" + log) != 0) {
        error_ = "openssl failed; see " + path("openssl.log");
        return;
      }
    }
  }
  ~Pki() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& error() const { return error_; }
  std::string path(const std::string& file) const { return dir_ + "/" + file; }

 private:
  static std::string ca(const std::string& name) {
    return "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + name +
           ".key -out " + name + ".pem -days 2 -subj /CN=" + name +
           " -addext basicConstraints=critical,CA:TRUE"
           " -addext keyUsage=critical,keyCertSign,cRLSign";
  }
  static std::string leaf(const std::string& name, const std::string& cn, const std::string& san) {
    return "printf 'subjectAltName=" + san +
           "\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > " + name +
           ".ext && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " +
           name + ".key -out " + name + ".csr -subj /CN=" + cn + " && openssl x509 -req -in " +
           name + ".csr -CA ca.pem -CAkey ca.key -set_serial 1001 -days 2 -out " + name +
           ".pem -extfile " + name + ".ext";
  }
  std::string dir_;
  std::string error_;
};

class HttpsFetch : public HttpFetch {
 protected:
  static void SetUpTestSuite() { pki_ = new Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  void SetUp() override {
    SLUICE_REQUIRE(pki_->error().empty(), "openssl, to make the test PKI (" + pki_->error() + ")",
                   "Debian package openssl; scripts/install-deps.sh installs it");
  }

  // A TLS server context for the certificate `name` (server, other).
  std::unique_ptr<ssl::context> server_context(const std::string& name) {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
    error_code ec;
    ctx->use_certificate_chain_file(pki_->path(name + ".pem"), ec);
    EXPECT_FALSE(ec) << ec.message();
    ctx->use_private_key_file(pki_->path(name + ".key"), ssl::context::pem, ec);
    EXPECT_FALSE(ec) << ec.message();
    return ctx;
  }
  FetchOptions trusting(const std::string& ca) const {
    FetchOptions o;
    o.ca_file = pki_->path(ca + ".pem");
    return o;
  }
  static std::string https(const std::string& host, const TestServer& s,
                           const std::string& path = "/jwks") {
    return "https://" + host + ":" + std::to_string(s.port()) + path;
  }

  static Pki* pki_;
};

Pki* HttpsFetch::pki_ = nullptr;

TEST_F(HttpsFetch, VerifiedByTheCaFileForAnAddress) {
  auto tls = server_context("server");
  auto& s = serve({ok_with_length(kJwks)}, tls.get());
  auto r = fetch(https("127.0.0.1", s), trusting("ca"));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, kJwks);
  EXPECT_EQ(s.sni, "");  // no SNI for an address
  EXPECT_EQ(s.request.rfind("GET /jwks HTTP/1.1\r\n", 0), 0u) << s.request;
}

TEST_F(HttpsFetch, VerifiedByTheCaFileForANameWithSni) {
  auto tls = server_context("server");
  auto& s = serve({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n0\r\n\r\n"},
                  tls.get());
  auto r = fetch(https("localhost", s), trusting("ca"));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, "{}\n");
  EXPECT_EQ(s.sni, "localhost");
}

TEST_F(HttpsFetch, CloseDelimitedBodyNeedsCloseNotify) {
  auto tls = server_context("server");
  auto& s = serve({"HTTP/1.1 200 OK\r\n\r\n" + kJwks}, tls.get());
  auto r = fetch(https("127.0.0.1", s), trusting("ca"));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, kJwks);
  // A TCP close without close_notify could be an attacker cutting the body short.
  auto& cut = serve({"HTTP/1.1 200 OK\r\n\r\n" + kJwks, false, false, false}, tls.get());
  r = fetch(https("127.0.0.1", cut), trusting("ca"));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "close_notify")) << r.error;
}

TEST_F(HttpsFetch, AnotherCaIsAVerificationError) {
  auto tls = server_context("server");
  auto& s = serve({ok_with_length(kJwks)}, tls.get());
  auto r = fetch(https("127.0.0.1", s), trusting("other-ca"));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "certificate verification failed")) << r.error;
  EXPECT_TRUE(s.request.empty());  // nothing was sent
}

TEST_F(HttpsFetch, TheSystemsCasDoNotKnowThePrivateCa) {
  auto tls = server_context("server");
  auto& s = serve({ok_with_length(kJwks)}, tls.get());
  auto r = fetch(https("localhost", s));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "certificate verification failed")) << r.error;
}

TEST_F(HttpsFetch, CertificateForAnotherNameIsRefused) {
  auto tls = server_context("other");
  auto& s = serve({ok_with_length(kJwks)}, tls.get());
  auto r = fetch(https("localhost", s), trusting("ca"));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "certificate verification failed: hostname mismatch")) << r.error;
  EXPECT_TRUE(s.request.empty());

  auto& by_address = serve({ok_with_length(kJwks)}, tls.get());
  r = fetch(https("127.0.0.1", by_address), trusting("ca"));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "certificate verification failed: IP address mismatch")) << r.error;
}

TEST_F(HttpsFetch, PlaintextServerOnAnHttpsUrl) {
  auto& s = serve({ok_with_length(kJwks), true});
  auto r = fetch(https("127.0.0.1", s), trusting("ca"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.error, "TLS handshake")) << r.error;
}

TEST_F(HttpsFetch, TlsOlderThan12IsRefused) {
  auto tls = server_context("server");
  SSL_CTX_set_security_level(tls->native_handle(), 0);
  SSL_CTX_set_min_proto_version(tls->native_handle(), TLS1_VERSION);
  SSL_CTX_set_max_proto_version(tls->native_handle(), TLS1_1_VERSION);
  auto& s = serve({ok_with_length(kJwks)}, tls.get());
  auto r = fetch(https("127.0.0.1", s), trusting("ca"));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "TLS handshake")) << r.error;
  EXPECT_TRUE(s.request.empty());
}

TEST_F(HttpsFetch, UnusableCaFileIsAnErrorBeforeConnecting) {
  auto tls = server_context("server");
  auto& s = serve({ok_with_length(kJwks)}, tls.get());
  auto r = fetch(https("127.0.0.1", s), trusting("no-such-ca"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "ca_file " + pki_->path("no-such-ca.pem") + ": No such file or directory");
  // A file with no certificate in it (here a private key).
  FetchOptions o;
  o.ca_file = pki_->path("ca.key");
  r = fetch(https("127.0.0.1", s), o);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.rfind("ca_file " + o.ca_file + ": ", 0), 0u) << r.error;
  EXPECT_EQ(s.connections, 0);
}

// A model server's TLS setting (the model catalogue's polls): its context
// instead of ca_file, its serverName checked and sent, insecureSkipVerify
// honoured; the Authorization field sent over it.
TEST_F(HttpsFetch, AModelServersSettingIsUsedAsTheProxiedRequestsUseIt) {
  auto setting = [&](const std::string& ca, const std::string& name, bool insecure) {
    config::Config c;
    c.server.upstream_tls.enabled = true;
    c.server.upstream_tls.ca_file = pki_->path(ca + ".pem");
    c.server.upstream_tls.server_name = name;
    c.server.upstream_tls.insecure_skip_verify = insecure;
    std::string error;
    auto set = build_upstream_tls(c, error);
    EXPECT_NE(set, nullptr) << error;
    FetchOptions o;
    o.tls = set ? set->pool : nullptr;
    o.ca_file = pki_->path("no-such-ca.pem");  // not read with a setting
    o.authorization = "Bearer engine-key";
    return o;
  };
  auto tls = server_context("server");
  auto& s = serve({ok_with_length(kJwks)}, tls.get());
  auto r = fetch(https("127.0.0.1", s, "/v1/models"), setting("ca", "localhost", false));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(s.sni, "localhost");  // serverName, though the URL names an address
  EXPECT_TRUE(contains(s.request, "\r\nAuthorization: Bearer engine-key\r\n")) << s.request;

  auto& other = serve({ok_with_length(kJwks)}, tls.get());
  r = fetch(https("127.0.0.1", other), setting("other-ca", "", false));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "certificate verification failed")) << r.error;
  EXPECT_TRUE(other.request.empty());  // nothing was sent, the credential neither

  auto& wrong_name = serve({ok_with_length(kJwks)}, tls.get());
  r = fetch(https("127.0.0.1", wrong_name), setting("ca", "other.example", false));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.error, "hostname mismatch")) << r.error;

  auto& skipped = serve({ok_with_length(kJwks)}, tls.get());
  r = fetch(https("127.0.0.1", skipped), setting("other-ca", "", true));
  EXPECT_TRUE(r.ok) << r.error;
}

TEST_F(HttpsFetch, ServerThatNeverFinishesTheHandshakeTimesOut) {
  auto& s = serve({.hang = true});  // plain TCP: reads the ClientHello, says nothing
  FetchOptions o = trusting("ca");
  o.timeout = 300ms;
  auto r = fetch(https("127.0.0.1", s), o, 5s);
  EXPECT_EQ(r.error.rfind("timed out", 0), 0u) << r.error;
  EXPECT_TRUE(contains(r.error, "TLS handshake")) << r.error;
}

}  // namespace
}  // namespace sluice::datalayer

#ifndef SLUICE_SANITIZER_ALLOCATOR
// Without a sanitizer's allocator: every new of the program notes its size.
void* operator new(std::size_t n) {
  sluice::datalayer::note_allocation(n);
  if (n == 0) n = 1;
  for (;;) {
    if (void* p = std::malloc(n)) return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

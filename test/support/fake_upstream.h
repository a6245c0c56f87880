// A scriptable model-server stand-in for hostile-endpoint tests: it accepts
// on 127.0.0.1 port 0, reads each HTTP/1.1 request (head + Content-Length
// body), records it, and writes whatever bytes the test's responder returns
// — interim responses, lies about lengths, garbage, a close. Optionally over
// TLS (an HTTPS model server), or both on one port (a connection whose first
// byte opens a TLS handshake is served over TLS). One thread per
// connection; everything stops (sockets shut down, threads joined) in the
// destructor.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sluice::test {

struct UpstreamRequest {
  std::string head;  // request line + headers, as received
  std::string body;
  bool tls = false;  // it came over TLS

  std::string header(const std::string& lower_name) const;  // "" when absent
};

// TLS on a FakeUpstream's port: its certificate chain and key (PEM files).
struct FakeTls {
  std::string certificate_file;
  std::string key_file;
  bool also_plain = false;  // plain HTTP too, on the same port
};

class FakeUpstream {
 public:
  // What to send for a request; `close_after` closes the connection after it.
  struct Reply {
    std::string bytes;
    bool close_after = false;
    // With close_after: the close goes out in the same segment as the last
    // of the bytes (TCP_CORK, then the write side shut down), so the
    // reader's one readiness event reports both.
    bool close_with_bytes = false;
    // Called (on the connection's thread) once `bytes` went out; what it
    // returns is sent next, as the last of the bytes. It may wait for what
    // the test has seen of the first part.
    std::function<std::string()> then;
    // Called (on the connection's thread) after everything before went out,
    // again and again while it returns true: each `part` it fills goes out
    // on its own (a stream produced step by step; it may wait for what the
    // test has seen of the parts before).
    std::function<bool(std::string& part)> next;
  };
  using Responder = std::function<Reply(const UpstreamRequest&)>;

  // `receive_buffer` > 0: the listening socket's SO_RCVBUF, inherited by
  // the connections (a small one makes a large request's write from sluice
  // take many partial writes).
  explicit FakeUpstream(Responder responder, int receive_buffer = 0);
  // Over TLS (and plain too, with tls.also_plain). ok() false if the
  // certificate or key does not load.
  FakeUpstream(Responder responder, const FakeTls& tls);
  ~FakeUpstream();
  bool ok() const { return listen_fd_ >= 0; }

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // What GET /metrics answers (200 with this text, read at each scrape);
  // unset: 404. Scrapes are never recorded as requests. Any thread.
  void set_metrics(std::string text);
  // With this set, a GET /metrics whose Authorization field is not exactly
  // `value` is answered 401 (an engine started with an API key). Any thread.
  void require_metrics_authorization(std::string value);
  // GET /metrics received, over TLS or plain (counted when its head is
  // read, before the answer), and those answered 401.
  int scrapes(bool over_tls) const { return (over_tls ? tls_scrapes_ : plain_scrapes_).load(); }
  int scrapes_refused() const { return scrapes_refused_.load(); }
  // TLS handshakes completed.
  int tls_handshakes() const { return tls_handshakes_.load(); }
  // Inference requests received so far (GET /metrics scrapes are answered
  // with 404, or set_metrics' text, and not recorded).
  std::vector<UpstreamRequest> requests();
  int connections() const { return connections_.load(); }
  // Replies whose sending failed: the peer (sluice) closed or reset the
  // connection while they went out.
  int send_failures() const { return send_failures_.load(); }
  // Request bytes read so far, all connections.
  std::uint64_t bytes_received() const { return bytes_received_.load(); }

  // A whole response with a Content-Length.
  static std::string response(int status, const std::string& body,
                              const std::string& extra_headers = "");

 private:
  struct Wire;
  void start_listening(int receive_buffer);
  void accept_loop();
  void serve(int fd);
  bool answer_scrape(Wire& wire, const UpstreamRequest& r);

  Responder responder_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> send_failures_{0};
  std::atomic<std::uint64_t> bytes_received_{0};
  std::atomic<int> plain_scrapes_{0};
  std::atomic<int> tls_scrapes_{0};
  std::atomic<int> scrapes_refused_{0};
  std::atomic<int> tls_handshakes_{0};
  void* tls_ctx_ = nullptr;  // SSL_CTX; null: plain HTTP only
  bool also_plain_ = false;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::vector<int> fds_;
  std::vector<UpstreamRequest> requests_;
  std::optional<std::string> metrics_;  // under mu_
  std::string metrics_authorization_;   // under mu_
};

}  // namespace sluice::test

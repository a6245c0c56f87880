// A blocking HTTP/1.1 client for integration tests: keep-alive, timeouts,
// SSE streams with per-event arrival times, and raw-socket helpers for
// sending deliberately broken requests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sluice::test {

using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;

struct Response {
  int status = 0;                              // 0: no response (transport error, see `error`)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string error;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct SseEvent {
  std::string data;
  Clock::time_point at;
};

struct StreamResult {
  Response head;  // status and headers; body unused
  std::vector<SseEvent> events;
  Clock::time_point sent_at;
  bool complete = false;  // the HTTP message ended properly
  std::string error;      // transport/protocol error that ended the stream
};

class HttpClient {
 public:
  HttpClient(std::string host, std::uint16_t port,
             std::chrono::milliseconds timeout = std::chrono::milliseconds(15000));
  ~HttpClient();

  Response request(const std::string& method, const std::string& target,
                   const std::string& body = {}, const Headers& headers = {});
  Response post_json(const std::string& target, const std::string& body,
                     const Headers& headers = {}) {
    Headers h = headers;
    h.emplace_back("Content-Type", "application/json");
    return request("POST", target, body, h);
  }
  // Streams a response, recording each SSE `data:` event as it arrives.
  // `on_event` returning false closes the connection at once (a client that
  // goes away mid-stream).
  StreamResult stream(
      const std::string& target, const std::string& body, const Headers& headers = {},
      const std::function<bool(const Response& head, const SseEvent&)>& on_event = {});

  int connections_opened() const { return connections_; }
  void close();

 private:
  struct Impl;
  bool ensure_connected(std::string& error);
  std::string host_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  int connections_ = 0;
  std::unique_ptr<Impl> impl_;
};

// A plain TCP connection for sending malformed or slow requests.
class RawConnection {
 public:
  // `receive_buffer` > 0: SO_RCVBUF, set before connecting (a client whose
  // window closes after a few KiB when it does not read). `local_host`: the
  // address to connect from (e.g. 127.0.0.2: another client on loopback).
  RawConnection(const std::string& host, std::uint16_t port, int receive_buffer = 0,
                const std::string& local_host = "");
  ~RawConnection();
  bool connected() const { return fd_ >= 0; }
  std::uint16_t local_port() const;
  bool send(const std::string& bytes);
  // Reads until the peer closes or `timeout` passes. `closed` says which.
  std::string read_until_close(std::chrono::milliseconds timeout, bool* closed);

 private:
  int fd_ = -1;
};

// The send queue (bytes written but not yet taken by the peer) of the IPv4
// TCP socket from local_port to remote_port on this host, from
// /proc/net/tcp; -1 if there is none.
long tcp_send_queue(std::uint16_t local_port, std::uint16_t remote_port);
// True while that socket's send buffer is full (`ss -tmi`: the bytes queued,
// skmem w, have reached its size, tb): a write to it now takes part or
// nothing, so the writer's next write waits for the peer to read.
bool tcp_send_buffer_full(std::uint16_t local_port, std::uint16_t remote_port);

// GETs http://host:port/metrics and returns the value of the first sample
// whose line starts with `name` (name may include labels), or -1.
double scrape_metric(const std::string& host, std::uint16_t port, const std::string& name);

// The values of several samples read from ONE /metrics page, so that they
// describe the same instant (two scrapes can each see a request that moved
// from one gauge to the other in between). -1 for a sample not found.
std::vector<double> scrape_metrics(const std::string& host, std::uint16_t port,
                                   const std::vector<std::string>& names);

}  // namespace sluice::test

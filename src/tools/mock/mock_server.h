// sluice-mock's HTTP front: OpenAI completions and chat completions (plain and
// SSE), /v1/models, /metrics in vLLM's or SGLang's names, /health. Runs on one
// thread; the engine steps on a timer.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <string>

#include "tools/mock/mock_engine.h"

namespace sluice::mock {

struct ServerOptions {
  std::string engine = "vllm";  // vllm | sglang
  std::string model = "mock-model";
};

class MockServer {
 public:
  MockServer(boost::asio::io_context& ioc, ServerOptions options, EngineOptions engine);

  // Binds and starts accepting; returns "host:port".
  std::string listen(const std::string& host, std::uint16_t port);
  void stop();

  MockEngine& engine() { return engine_; }
  const ServerOptions& options() const { return options_; }
  // Wakes the engine loop after a submission.
  void kick();
  std::string metrics_text() const;

  std::uint64_t requests_total = 0;
  std::uint64_t requests_cancelled_total = 0;
  std::uint64_t connections_total = 0;
  std::uint64_t next_response_id = 1;

 private:
  void accept();
  void step();

  boost::asio::io_context& ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer timer_;
  ServerOptions options_;
  MockEngine engine_;
  bool stepping_ = false;
};

}  // namespace sluice::mock

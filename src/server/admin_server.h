// The admin plane: its own listener and thread, JSON in and out (DESIGN.md
// §3.2). Reads and changes of flow-control state run on the dispatcher
// thread (ControllerShell::reconfigure), the single writer; the answer is
// posted back to the admin thread. Mutations need `Authorization: Bearer
// <token>` when a token is configured.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "flowcontrol/controller_shell.h"

namespace sluice::server {

struct ProxyContext;
class Server;

class AdminServer {
 public:
  // `token` empty: mutations are allowed without one (loopback only; main
  // refuses a non-loopback admin address without a token).
  AdminServer(Server& server, std::string token);
  ~AdminServer();

  // Binds (throws at startup) and returns the bound "HOST:PORT".
  std::string bind(const std::string& listen);
  void start();
  void stop();

  // Internal: one request -> (status, JSON body); `respond` is called
  // exactly once, on the admin thread.
  struct Reply {
    int status = 200;
    std::string body;
  };
  void handle(const std::string& method, const std::string& target,
              const std::string& authorization, const std::string& body,
              std::function<void(Reply)> respond);

 private:
  void accept();
  // Runs `fn` on the dispatcher, then `respond(fn's reply)` on this thread.
  void on_dispatcher(std::function<Reply(flowcontrol::Controller&)> fn,
                     std::function<void(Reply)> respond);

  Server& server_;
  ProxyContext& ctx_;
  std::string token_;
  boost::asio::io_context ioc_{1};
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  std::unique_ptr<flowcontrol::ControllerShell::Producer> producer_;  // admin thread only
  std::thread thread_;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace sluice::server

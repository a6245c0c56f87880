#include "proxy/connection_limit.h"

#include <sys/socket.h>

#include "flowcontrol/outcome_response.h"

namespace sluice::proxy {

void ConnectionLimit::refuse(int fd, bool answer) {
  static const std::string response = [] {
    const std::string body = flowcontrol::openai_error_body(
        "too many connections; try again shortly", "server_error", "too-many-connections");
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
           "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  // A fresh socket's send buffer is empty: this goes out whole or not at all.
  if (answer) (void)::send(fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  // Bytes the client sent already (its request) and left unread would make
  // the close a reset, which can destroy the 503 before it is read: read
  // what is there, without waiting. Best effort: bytes still on their way
  // can still turn the close into a reset.
  char sink[4096];
  for (int i = 0; i < 16; ++i)
    if (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
}

}  // namespace sluice::proxy

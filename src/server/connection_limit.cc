#include "server/connection_limit.h"

#include <sys/socket.h>

#include "flowcontrol/outcome_response.h"

namespace sluice::server {

void ConnectionLimit::refuse(int fd) {
  static const std::string response = [] {
    const std::string body = flowcontrol::openai_error_body(
        "too many connections; try again shortly", "server_error", "too-many-connections");
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
           "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  // A fresh socket's send buffer is empty: this goes out whole or not at all.
  (void)::send(fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
}

}  // namespace sluice::server

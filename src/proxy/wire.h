// Small helpers of the exchange's code (proxy/exchange.h) for writing to a
// socket: numbers, a send that does not wait, writes coalesced.
#pragma once

#include <sys/socket.h>

#include <boost/asio/buffer.hpp>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <span>
#include <string>

#include "proxy/upstream_pool.h"

namespace sluice::proxy::wire {

// A relayed read of an endpoint's answer.
inline constexpr std::size_t kRelayReadSize = 16384;
// An endpoint's response head, and any chunk-size line or trailer after it.
inline constexpr std::size_t kMaxResponseHeadBytes = 64 * 1024;
// Writes of several pieces up to this size are copied into one buffer.
inline constexpr std::size_t kCoalesceBytes = 4096;

inline void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}

// A send that does not wait: how much of `b` the socket took now (0 when
// its buffer is full), or the socket's error in `ec`.
inline std::size_t try_send(Socket& socket, boost::asio::const_buffer b,
                            boost::system::error_code& ec) {
  const ssize_t n = ::send(socket.native_handle(), b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n >= 0) return static_cast<std::size_t>(n);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    ec.assign(errno, boost::system::system_category());
  return 0;
}

// Pieces that add up to a small write are copied into `into`: copying a few
// KB costs less than the kernel's import of a scatter list (sendmsg against
// send, measured in the proxy bench).
inline bool coalesce(std::span<const boost::asio::const_buffer> pieces, std::string& into) {
  std::size_t total = 0;
  for (const auto& b : pieces) total += b.size();
  if (pieces.size() < 2 || total > kCoalesceBytes) return false;
  into.clear();
  for (const auto& b : pieces) into.append(static_cast<const char*>(b.data()), b.size());
  return true;
}

}  // namespace sluice::proxy::wire

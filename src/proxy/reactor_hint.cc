#include "proxy/reactor_hint.h"

#include <sys/epoll.h>

#include <boost/version.hpp>
#include <cstdint>

#if BOOST_VERSION == 108100 && defined(BOOST_ASIO_HAS_EPOLL) &&                      \
    !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT) && !defined(BOOST_ASIO_HAS_IOCP) && \
    !defined(BOOST_ASIO_WINDOWS_RUNTIME)
#define SLUICE_REACTOR_HINT 1
#endif

namespace sluice::proxy {

#ifdef SLUICE_REACTOR_HINT
namespace {

namespace net = boost::asio;
using BaseSocket = net::basic_socket<net::ip::tcp, Executor>;
using SocketImpl =
    net::detail::io_object_impl<net::detail::reactive_socket_service<net::ip::tcp>, Executor>;
using DescriptorState = net::detail::epoll_reactor::descriptor_state;

// Explicit instantiation may name private members; the friend function it
// defines hands out the member pointer.
template <class Tag, typename Tag::type Member>
struct Access {
  friend typename Tag::type get(Tag) { return Member; }
};
struct SocketImplTag {
  using type = SocketImpl BaseSocket::*;
  friend type get(SocketImplTag);
};
struct SpeculativeTag {
  using type = bool (DescriptorState::*)[net::detail::epoll_reactor::max_ops];
  friend type get(SpeculativeTag);
};
struct ReactorTag {
  using type = net::detail::epoll_reactor* DescriptorState::*;
  friend type get(ReactorTag);
};
struct DescriptorTag {
  using type = int DescriptorState::*;
  friend type get(DescriptorTag);
};
struct RegisteredEventsTag {
  using type = std::uint32_t DescriptorState::*;
  friend type get(RegisteredEventsTag);
};
struct EpollFdTag {
  using type = int net::detail::epoll_reactor::*;
  friend type get(EpollFdTag);
};
template struct Access<SocketImplTag, &BaseSocket::impl_>;
template struct Access<SpeculativeTag, &DescriptorState::try_speculative_>;
template struct Access<ReactorTag, &DescriptorState::reactor_>;
template struct Access<DescriptorTag, &DescriptorState::descriptor_>;
template struct Access<RegisteredEventsTag, &DescriptorState::registered_events_>;
template struct Access<EpollFdTag, &net::detail::epoll_reactor::epoll_fd_>;

DescriptorState* state_of(Socket& socket) {
  BaseSocket& base = socket;
  return (base.*get(SocketImplTag{})).get_implementation().reactor_data_;
}

}  // namespace

bool reactor_hint_supported() { return true; }

void skip_next_speculative_read(Socket& socket) {
  if (DescriptorState* state = state_of(socket))
    (state->*get(SpeculativeTag{}))[net::detail::epoll_reactor::read_op] = false;
}

bool rearm_read_readiness(Socket& socket) {
  if (!socket.is_open()) return false;
  DescriptorState* state = state_of(socket);
  if (!state) return false;
  const std::uint32_t events = state->*get(RegisteredEventsTag{});
  if (events == 0) return false;
  // What the reactor does itself when a write needs EPOLLOUT: the same
  // registration, modified, so the kernel reports the descriptor again if
  // it is ready now.
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = state;
  net::detail::epoll_reactor* reactor = state->*get(ReactorTag{});
  return ::epoll_ctl(reactor->*get(EpollFdTag{}), EPOLL_CTL_MOD, state->*get(DescriptorTag{}),
                     &ev) == 0;
}

#else

bool reactor_hint_supported() { return false; }
void skip_next_speculative_read(Socket&) {}
bool rearm_read_readiness(Socket&) { return false; }

#endif

}  // namespace sluice::proxy

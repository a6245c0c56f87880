#include "server/reactor_hint.h"

#include <boost/version.hpp>

#if BOOST_VERSION == 108100 && defined(BOOST_ASIO_HAS_EPOLL) &&                      \
    !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT) && !defined(BOOST_ASIO_HAS_IOCP) && \
    !defined(BOOST_ASIO_WINDOWS_RUNTIME)
#define SLUICE_REACTOR_HINT 1
#endif

namespace sluice::server {

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
template struct Access<SocketImplTag, &BaseSocket::impl_>;
template struct Access<SpeculativeTag, &DescriptorState::try_speculative_>;

}  // namespace

bool reactor_hint_supported() { return true; }

void skip_next_speculative_read(Socket& socket) {
  BaseSocket& base = socket;
  DescriptorState* state = (base.*get(SocketImplTag{})).get_implementation().reactor_data_;
  if (state) (state->*get(SpeculativeTag{}))[net::detail::epoll_reactor::read_op] = false;
}

#else

bool reactor_hint_supported() { return false; }
void skip_next_speculative_read(Socket&) {}

#endif

}  // namespace sluice::server

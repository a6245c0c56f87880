// A hint to Asio's epoll reactor (Boost 1.81) that a socket has nothing to
// read, so the next read on it waits for readiness instead of trying a
// receive first.
//
// Asio starts every read with a receive ("speculative"), and it keeps doing
// so after any readiness event until a receive returns end-of-stream. On a
// pooled upstream connection that is always wasted: the answer to a request
// cannot be there when the request has just been written, so the receive
// fails with EAGAIN — one system call in every proxied request (0.72 per
// request in the pinned proxy benchmark). The only other way to wait
// without it, a readiness wait, costs an EPOLL_CTL_MOD instead.
//
// Asio has no interface for this: the flag is a private member of the
// reactor's per-descriptor state, reached here through the explicit-
// instantiation access idiom, for Boost 1.81's epoll reactor only (the
// version Debian 12 ships and the build requires); anything else makes this
// a no-op. Call it on the socket's I/O thread only (the reactor runs there).
//
// Why nothing is lost: the reactor sets the flag again on every readiness
// event, so bytes, a close or a reset that arrive after the call are seen
// as before. What is lost is an event the reactor took in before the call
// while no read was pending (the flag it set is cleared), and a close that
// came in the same segment as the last bytes read: use it only where
// neither can matter, or where the second is watched for (mid-stream:
// proxy/hinted_reads.h). The completion of the read that ended a keep-alive
// answer, short and with nothing read past it, is such a place (the
// session calls it there, before the answer is written to the client):
// the window is that completion's dispatch, and a peer that closed in it
// answers the next request's bytes with a reset (an event). Only a peer
// that half-closes in that moment yet keeps reading, or whose host is gone
// before it can reset, would leave that request to its upstream timeout,
// as a silent endpoint does.
//
// The flag is written without the descriptor's lock: only while the
// io_context runs on one thread (sluice's I/O threads each run their own,
// with concurrency hint 1), on that thread.
#pragma once

#include "proxy/upstream_pool.h"

namespace sluice::proxy {

// Whether this build can give the hint (false: skip_next_speculative_read
// does nothing).
bool reactor_hint_supported();

// The next read on `socket` waits for a readiness event (one that comes
// after this call) instead of starting with a receive.
void skip_next_speculative_read(Socket& socket);

// Has the reactor report `socket` again if it is readable, closed by the
// peer or in error now (the readiness it took in once and a hint made it
// forget; proxy/hinted_reads.h): the reactor's own registration, modified
// unchanged (EPOLL_CTL_MOD), which queues an event for a ready descriptor.
// A pending read is then performed at the loop's next poll. Returns false
// if the socket is closed or the build cannot (and then nothing happens).
bool rearm_read_readiness(Socket& socket);

}  // namespace sluice::proxy

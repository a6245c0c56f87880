#include "proxy/tls_channel.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <climits>
#include <cstring>

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;

namespace {
// A record at least this large, with nothing queued before it, is sent from
// OpenSSL's buffer without a copy; smaller ones are gathered into one send.
constexpr std::size_t kDirectSendBytes = 4096;
// Small pieces of one write are gathered into one record up to this size.
constexpr std::size_t kGatherBytes = 16 * 1024;
// An emptied backlog that grew past this is given back.
constexpr std::size_t kKeepBacklogBytes = 64 * 1024;

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }
}  // namespace

// The BIO between OpenSSL and the socket (see the header).
struct TlsChannelBio {
  static TlsChannel& of(BIO* b) { return *static_cast<TlsChannel*>(BIO_get_data(b)); }
  static int write(BIO* b, const char* data, int size) {
    BIO_clear_retry_flags(b);
    return size <= 0 ? 0 : of(b).bio_write(data, static_cast<std::size_t>(size));
  }
  static int read(BIO* b, char* data, int size) {
    BIO_clear_retry_flags(b);
    if (size <= 0) return 0;
    const int n = of(b).bio_read(data, static_cast<std::size_t>(size));
    if (n < 0 && of(b).socket_errno_ == 0) BIO_set_retry_read(b);
    return n;
  }
  // A flush is always done (the channel sends what it can as it goes);
  // nothing else is supported.
  static long ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }
  static int create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
  }
  static int destroy(BIO*) { return 1; }
  static BIO_METHOD* method() {
    static BIO_METHOD* const m = [] {
      BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice-socket");
      if (!bm) return bm;
      BIO_meth_set_write(bm, &TlsChannelBio::write);
      BIO_meth_set_read(bm, &TlsChannelBio::read);
      BIO_meth_set_ctrl(bm, &TlsChannelBio::ctrl);
      BIO_meth_set_create(bm, &TlsChannelBio::create);
      BIO_meth_set_destroy(bm, &TlsChannelBio::destroy);
      return bm;
    }();
    return m;
  }
};

TlsChannel::TlsChannel(SSL_CTX* context, int fd) : fd_(fd) {
  BIO_METHOD* method = TlsChannelBio::method();
  if (!method) return;
  ssl_ = SSL_new(context);
  if (!ssl_) return;
  BIO* bio = BIO_new(method);
  if (!bio) {
    SSL_free(std::exchange(ssl_, nullptr));
    return;
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one reference, owned by the session
  SSL_set_accept_state(ssl_);
  SSL_set_read_ahead(ssl_, 1);
  // Buffers are freed while the connection idles, as Asio's stream does:
  // an idle keep-alive connection holds no record buffers.
  SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
  SSL_set_options(ssl_, SSL_OP_NO_RENEGOTIATION);
}

TlsChannel::~TlsChannel() {
  if (ssl_) SSL_free(ssl_);
}

int TlsChannel::bio_write(const char* data, std::size_t size) {
  if (socket_errno_ != 0) return -1;
  std::size_t sent = 0;
  if (flushed()) {
    backlog_.clear();
    backlog_sent_ = 0;
    if (size >= kDirectSendBytes) {
      const ssize_t n = ::send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) {
        sent = static_cast<std::size_t>(n);
      } else if (!would_block(errno)) {
        socket_errno_ = errno;
        return -1;
      }
    }
  }
  backlog_.append(data + sent, size - sent);
  return static_cast<int>(size);
}

int TlsChannel::bio_read(char* data, std::size_t size) {
  const ssize_t n = ::recv(fd_, data, size, MSG_DONTWAIT);
  if (n > 0) return static_cast<int>(n);
  if (n == 0) {
    peer_closed_ = true;
    return 0;
  }
  if (!would_block(errno)) socket_errno_ = errno;
  return -1;
}

bool TlsChannel::flush(error_code& ec) {
  while (backlog_sent_ < backlog_.size()) {
    const ssize_t n = ::send(fd_, backlog_.data() + backlog_sent_, backlog_.size() - backlog_sent_,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (would_block(errno)) return false;
      ec.assign(errno, boost::system::system_category());
      return false;
    }
    backlog_sent_ += static_cast<std::size_t>(n);
  }
  if (backlog_.capacity() > kKeepBacklogBytes)
    std::string().swap(backlog_);
  else
    backlog_.clear();
  backlog_sent_ = 0;
  return true;
}

// What an SSL call that returned `ret` <= 0 means: clear for "wait for
// readability"; else the error as Asio's ssl::stream reports it.
error_code TlsChannel::error_of(int ret) {
  const int e = SSL_get_error(ssl_, ret);
  error_code ec;
  switch (e) {
    case SSL_ERROR_WANT_READ:
      break;
    case SSL_ERROR_ZERO_RETURN:
      ec = net::error::eof;
      break;
    case SSL_ERROR_SSL: {
      const unsigned long err = ERR_get_error();
      if (ERR_GET_REASON(err) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        ec = net::ssl::error::stream_truncated;
      else
        ec.assign(static_cast<int>(err), net::error::get_ssl_category());
      break;
    }
    default:  // SSL_ERROR_SYSCALL, and what the BIO never asks for
      if (socket_errno_ != 0)
        ec.assign(socket_errno_, boost::system::system_category());
      else
        ec = net::ssl::error::stream_truncated;
      break;
  }
  ERR_clear_error();
  return ec;
}

TlsChannel::Want TlsChannel::handshake(error_code& ec) {
  if (!ssl_) {
    ec = net::error::no_memory;
    return Want::kNothing;
  }
  Want want = Want::kNothing;
  if (!SSL_is_init_finished(ssl_)) {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r != 1) {
      ec = error_of(r);
      want = Want::kRead;
    }
  }
  // The flight goes out before waiting for the answer to it (and an alert
  // before the failure is reported, if the socket takes it now).
  error_code flush_ec;
  const bool sent = flush(flush_ec);
  if (ec) return Want::kNothing;
  if (flush_ec) {
    ec = flush_ec;
    return Want::kNothing;
  }
  return sent ? want : Want::kWrite;
}

std::size_t TlsChannel::read(void* data, std::size_t size, error_code& ec) {
  ERR_clear_error();
  const int r = SSL_read(ssl_, data, static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
  if (r <= 0) ec = error_of(r);
  // What reading made OpenSSL write (a key update's answer) goes out when
  // the socket takes it; the next write flushes the rest first.
  if (!flushed()) {
    error_code ignored;
    flush(ignored);
  }
  return r > 0 ? static_cast<std::size_t>(r) : 0;
}

std::size_t TlsChannel::write_record(const void* data, std::size_t size, error_code& ec) {
  ERR_clear_error();
  const int r = SSL_write(ssl_, data, static_cast<int>(size));
  if (r > 0) return static_cast<std::size_t>(r);
  ec = error_of(r);
  if (!ec) ec = net::error::try_again;  // the BIO never asks to retry a write
  return 0;
}

std::size_t TlsChannel::write(const net::const_buffer* pieces, std::size_t count, error_code& ec) {
  if (!flushed()) return 0;
  // One thread's gather buffer: filled and encrypted within this call.
  thread_local std::array<char, kGatherBytes> gather;
  std::size_t consumed = 0;
  std::size_t gathered = 0;
  for (std::size_t i = 0; i < count && !ec && consumed + gathered < kMaxWriteBytes; ++i) {
    const auto* data = static_cast<const char*>(pieces[i].data());
    std::size_t size = std::min(pieces[i].size(), kMaxWriteBytes - consumed - gathered);
    if (count > 1 && size <= kGatherBytes - gathered) {
      std::memcpy(gather.data() + gathered, data, size);
      gathered += size;
      continue;
    }
    if (gathered > 0) {
      consumed += write_record(gather.data(), gathered, ec);
      gathered = 0;
      if (ec) break;
      size = std::min(size, kMaxWriteBytes - consumed);
    }
    if (count > 1 && size <= kGatherBytes) {
      std::memcpy(gather.data(), data, size);
      gathered = size;
    } else if (size > 0) {
      consumed += write_record(data, size, ec);
    }
  }
  if (!ec && gathered > 0) consumed += write_record(gather.data(), gathered, ec);
  if (!ec) flush(ec);
  return consumed;
}

void TlsChannel::shutdown(error_code& ec) {
  ERR_clear_error();
  const int r = SSL_shutdown(ssl_);  // 0: ours queued, the peer's not awaited
  if (r < 0) {
    ec = error_of(r);
    return;
  }
  flush(ec);
}

}  // namespace sluice::proxy

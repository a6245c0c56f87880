// A client connection's TLS session, driven by hand on the connection's
// non-blocking socket: OpenSSL reads with recv and writes through a small
// BIO of our own, so a write to a TLS client can complete at once, in the
// completion that produced the bytes, as a plain send does.
//
// Why not Asio's ssl::stream: it runs every read and write as an
// asynchronous operation through a BIO pair (the ciphertext copied between
// OpenSSL's buffers and Asio's, per operation), so each relayed write cost a
// trip through the event loop. Measured on the keep-alive TLS bench: 1.16-
// 1.25x HAProxy's CPU per request with ssl::stream (docs/benchmarks/
// tls-overhead.md).
//
// How writes work. The BIO's write never says "retry": what the kernel does
// not take now is kept in `backlog_` (ciphertext), so SSL_write always
// consumes all it is given, and the partial-write retry contract of
// SSL_write (same buffer, same length) never arises. The caller bounds the
// backlog: it writes again only once flushed() (the ClientStream's write
// operation waits for writability and flushes first). Records of one call
// are gathered into one send when small; a large record with nothing
// queued before it goes straight from OpenSSL's buffer to the kernel.
//
// How reads work. read_ahead is on (a whole socket buffer per recv, not a
// record header and then its body); a read tries SSL_read first and waits
// for readability only when OpenSSL needs bytes the socket has not got, so
// records buffered inside OpenSSL (pipelined requests) are never stranded.
//
// Errors as Asio's ssl::stream gives them: the close_notify → eof; the peer
// gone without one → ssl::error::stream_truncated; a TLS failure → its
// OpenSSL error code in Asio's ssl category (so SSL_R_HTTP_REQUEST still
// tells plain HTTP to the TLS port); a socket error → its errno.
//
// One thread: the connection's I/O thread. Renegotiation is refused.
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <string>

namespace sluice::proxy {

class TlsChannel {
 public:
  // A server-side session on `fd` (not owned), from `context`.
  TlsChannel(SSL_CTX* context, int fd);
  ~TlsChannel();
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  SSL* native_handle() const { return ssl_; }

  // What a step needs before it can go on.
  enum class Want { kNothing, kRead, kWrite };

  // The server's handshake, one step: kNothing with `ec` clear when it is
  // done and its last flight is flushed; kRead / kWrite to wait for; or
  // `ec`.
  Want handshake(boost::system::error_code& ec);
  // Up to `size` bytes of plaintext into `data`: > 0 read; 0 with `ec`
  // clear: wait for readability and call again; 0 with `ec`: EOF or error.
  std::size_t read(void* data, std::size_t size, boost::system::error_code& ec);
  // Encrypts pieces (small ones gathered into one record, at most
  // kMaxWriteBytes in all) and sends what the socket takes: how many
  // plaintext bytes were consumed. Only when flushed() (0 otherwise).
  // After it, flushed() false means ciphertext is waiting for writability.
  std::size_t write(const boost::asio::const_buffer* pieces, std::size_t count,
                    boost::system::error_code& ec);
  // Sends the backlog: true when none is left.
  bool flush(boost::system::error_code& ec);
  bool flushed() const { return backlog_sent_ == backlog_.size(); }
  // Queues a close_notify (does not wait for the peer's) and tries to send
  // it: flush until flushed() before closing.
  void shutdown(boost::system::error_code& ec);

  // Most plaintext one write() consumes.
  static constexpr std::size_t kMaxWriteBytes = 64 * 1024;

 private:
  friend struct TlsChannelBio;
  int bio_write(const char* data, std::size_t size);
  int bio_read(char* data, std::size_t size);
  boost::system::error_code error_of(int ret);
  std::size_t write_record(const void* data, std::size_t size, boost::system::error_code& ec);

  SSL* ssl_ = nullptr;
  int fd_;
  std::string backlog_;  // ciphertext not yet taken by the kernel
  std::size_t backlog_sent_ = 0;
  int socket_errno_ = 0;      // what the BIO's last recv or send failed with
  bool peer_closed_ = false;  // recv saw the TCP FIN
};

}  // namespace sluice::proxy

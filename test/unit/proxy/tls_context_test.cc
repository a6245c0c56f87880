// The TLS context built from server.tls (its load errors, its reload when
// the files change) and a client connection's TLS stream (handshake,
// verified client name, ALPN, close_notify, the deadline), over loopback
// on one io_context. Certificates come from the openssl command, made in a
// temporary directory (support/tls_client.h).
#include "proxy/tls_context.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "proxy/client_stream.h"
#include "support/process.h"
#include "support/tls_client.h"

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

std::string dir_of(const test::TempFile& f) { return f.path().substr(0, f.path().rfind('/')); }

struct Fixture {
  test::TempFile work{"", "openssl.log"};
  test::TestPki pki{dir_of(work)};
  config::TlsOptions options() const {
    config::TlsOptions o;
    o.listen = "127.0.0.1:0";
    o.certificate_file = pki.server_cert();
    o.key_file = pki.server_key();
    return o;
  }
  // The context of options(), or null with the error reported.
  std::shared_ptr<TlsServerContext> context() const {
    std::string error;
    auto c = build_tls_context(options(), error);
    EXPECT_TRUE(c) << error;
    return c;
  }
  void write(const std::string& file, const std::string& text) const {
    std::ofstream(pki.path(file)) << text;
  }
};

// The error a build from `o` gives ("" if it loaded).
std::string error_of(const config::TlsOptions& o) {
  std::string error;
  return build_tls_context(o, error) ? "" : error;
}

TEST(TlsContext, LoadErrorsNameTheFieldAndTheFile) {
  Fixture f;
  ASSERT_TRUE(f.pki.ok()) << f.pki.error();
  ASSERT_EQ(error_of(f.options()), "");
  std::string error;
  auto c = build_tls_context(f.options(), error);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->serial(), "03E9");
  EXPECT_EQ(c->subject(), "/CN=localhost");
  EXPECT_GT(c->not_after(), 0);
  EXPECT_NE(describe(*c).find("serial 03E9, valid until 20"), std::string::npos) << describe(*c);

  auto o = f.options();
  o.certificate_file = f.pki.path("missing.pem");
  EXPECT_EQ(error_of(o), "server.tls.certificateFile: " + o.certificate_file +
                             ": cannot open file (No such file or directory)");
  f.write("garbage.pem", "not a certificate\n");
  o.certificate_file = f.pki.path("garbage.pem");
  EXPECT_EQ(
      error_of(o).rfind(
          "server.tls.certificateFile: " + o.certificate_file + ": no PEM certificate in it", 0),
      0u)
      << error_of(o);
  o.certificate_file = dir_of(f.work);
  EXPECT_EQ(error_of(o), "server.tls.certificateFile: " + o.certificate_file + ": is a directory");

  // A key of another certificate.
  ASSERT_TRUE(f.pki.issue_client("other", "spiffe://x/other")) << f.pki.error();
  o = f.options();
  o.key_file = f.pki.path("other.key");
  EXPECT_EQ(error_of(o).rfind("server.tls.keyFile: " + o.key_file +
                                  ": does not match the certificate in " + o.certificate_file,
                              0),
            0u)
      << error_of(o);
  o.key_file = f.pki.path("garbage.pem");
  EXPECT_EQ(error_of(o).rfind(
                "server.tls.keyFile: " + o.key_file + ": no unencrypted PEM private key in it", 0),
            0u)
      << error_of(o);
  // An encrypted key is refused, never asked a passphrase for.
  ASSERT_EQ(test::run_command("openssl pkey -in " + f.pki.server_key() +
                              " -aes256 -passout pass:secret -out " + f.pki.path("encrypted.key")),
            0);
  o.key_file = f.pki.path("encrypted.key");
  EXPECT_EQ(error_of(o).rfind(
                "server.tls.keyFile: " + o.key_file + ": no unencrypted PEM private key in it", 0),
            0u)
      << error_of(o);

  o = f.options();
  o.ciphers = "NO-SUCH-CIPHER";
  EXPECT_EQ(error_of(o).rfind("server.tls.ciphers: no usable cipher in 'NO-SUCH-CIPHER'", 0), 0u)
      << error_of(o);
  o = f.options();
  o.cipher_suites = "TLS_NO_SUCH_SUITE";
  EXPECT_EQ(error_of(o).rfind("server.tls.cipherSuites: no usable suite in 'TLS_NO_SUCH_SUITE'", 0),
            0u)
      << error_of(o);
  o = f.options();
  f.write("empty.pem", "");
  o.client_ca_file = f.pki.path("empty.pem");
  EXPECT_EQ(error_of(o).rfind(
                "server.tls.clientCaFile: " + o.client_ca_file + ": no PEM certificate in it", 0),
            0u)
      << error_of(o);
  o.client_ca_file = f.pki.ca();
  EXPECT_EQ(error_of(o), "");

  // At startup: a config error.
  o = f.options();
  o.key_file = f.pki.path("missing.key");
  try {
    TlsCredentials creds(o);
    ADD_FAILURE() << "no error";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "server.tls.keyFile: " + o.key_file +
                                         ": cannot open file (No such file or directory)");
  }
}

TEST(TlsContext, ChangedFilesAreLoadedAndASetThatDoesNotLoadKeepsTheRunningOne) {
  Fixture f;
  ASSERT_TRUE(f.pki.ok()) << f.pki.error();
  TlsCredentials creds(f.options());
  auto first = creds.current();
  EXPECT_EQ(first->serial(), "03E9");
  std::string message;
  EXPECT_EQ(creds.check_files(message), TlsCredentials::Check::kUnchanged);

  ASSERT_TRUE(f.pki.reissue_server(1002)) << f.pki.error();
  EXPECT_EQ(creds.check_files(message), TlsCredentials::Check::kReloaded);
  EXPECT_NE(message.find("serial 03EA"), std::string::npos) << message;
  EXPECT_EQ(creds.current()->serial(), "03EA");
  EXPECT_EQ(first->serial(), "03E9");  // what a connection in progress holds
  EXPECT_EQ(creds.reloads(), 1u);

  f.write("server.key", "garbage\n");
  EXPECT_EQ(creds.check_files(message), TlsCredentials::Check::kFailed);
  EXPECT_NE(message.find("server.tls.keyFile"), std::string::npos) << message;
  EXPECT_EQ(creds.current()->serial(), "03EA");
  EXPECT_EQ(creds.failures(), 1u);
  // Not tried again until a file changes again.
  EXPECT_EQ(creds.check_files(message), TlsCredentials::Check::kUnchanged);
  ASSERT_TRUE(f.pki.reissue_server(1003)) << f.pki.error();
  EXPECT_EQ(creds.check_files(message), TlsCredentials::Check::kReloaded);
  EXPECT_EQ(creds.current()->serial(), "03EB");

  // A reload installs what it built, from its own options.
  std::string error;
  ASSERT_TRUE(f.pki.reissue_server(1004)) << f.pki.error();
  auto next = build_tls_context(f.options(), error);
  ASSERT_TRUE(next) << error;
  creds.install(next, f.options());
  EXPECT_EQ(creds.current()->serial(), "03EC");
  EXPECT_EQ(creds.check_files(message), TlsCredentials::Check::kUnchanged);
  EXPECT_EQ(creds.reloads(), 3u);
}

// A server-side ClientStream and an Asio TLS client, connected over
// loopback on one io_context.
struct TlsPair {
  net::io_context ioc{1};
  ssl::context client_ctx{ssl::context::tls_client};
  std::unique_ptr<ClientStream> server;
  std::unique_ptr<ssl::stream<tcp::socket>> client;

  explicit TlsPair(std::shared_ptr<TlsServerContext> context,
                   const std::function<void(ssl::context&)>& setup = {}) {
    if (setup) setup(client_ctx);
    tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    client = std::make_unique<ssl::stream<tcp::socket>>(ioc, client_ctx);
    client->lowest_layer().connect(acceptor.local_endpoint());
    Socket s(ioc.get_executor());
    acceptor.accept(s);
    server = std::make_unique<ClientStream>(std::move(s), std::move(context));
  }
  // Runs handlers until `done` (the stream's deadline timer keeps the
  // loop from running out of work).
  template <class Done>
  void run_until(Done done) {
    while (!done() && ioc.run_one() > 0) {
    }
  }
  // Both halves of the handshake; the server's error.
  error_code handshake() {
    bool server_done = false, client_done = false;
    error_code server_ec;
    server->expires_after(5s);
    server->async_handshake([&](error_code ec) {
      server_ec = ec;
      server_done = true;
    });
    client->async_handshake(ssl::stream_base::client, [&](error_code) { client_done = true; });
    run_until([&] { return server_done && client_done; });
    return server_ec;
  }
};

std::string alpn_of(ssl::stream<tcp::socket>& s) {
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(s.native_handle(), &p, &len);
  return p ? std::string(reinterpret_cast<const char*>(p), len) : "";
}

TEST(ClientStream, TheHandshakeGivesTheVerifiedNameAndHttp11AndCloseNotifyEndsIt) {
  Fixture f;
  ASSERT_TRUE(f.pki.ok()) << f.pki.error();
  ASSERT_TRUE(f.pki.issue_client("tenant-a", "spiffe://sluice.test/tenant-a")) << f.pki.error();
  ASSERT_TRUE(f.pki.issue_client("cn-only", "")) << f.pki.error();
  auto o = f.options();
  o.client_ca_file = f.pki.ca();
  std::string error;
  auto context = build_tls_context(o, error);
  ASSERT_TRUE(context) << error;

  for (const auto& [name, expected] :
       {std::pair<std::string, std::string>{"tenant-a", "spiffe://sluice.test/tenant-a"},
        {"cn-only", "cn-only"},
        {"", ""}}) {
    SCOPED_TRACE(name);
    // A copy: clang 14 cannot capture a structured binding.
    const std::string client = name;
    TlsPair p(context, [&](ssl::context& c) {
      if (client.empty()) return;
      c.use_certificate_chain_file(f.pki.path(client + ".pem"));
      c.use_private_key_file(f.pki.path(client + ".key"), ssl::context::pem);
    });
    static constexpr unsigned char kOffer[] = "\x02h2\x08http/1.1";
    SSL_set_alpn_protos(p.client->native_handle(), kOffer, sizeof kOffer - 1);
    ASSERT_FALSE(p.handshake());
    p.server->handshake_done();
    EXPECT_EQ(p.server->peer_name(), expected);
    EXPECT_EQ(alpn_of(*p.client), "http/1.1");

    // Bytes through, then the server's close_notify: the client reads its
    // end (EOF, not a cut), and the server did not wait for the client's.
    net::write(*p.client, net::buffer("hello", 5));
    char in[16];
    std::size_t got = 0;
    p.server->async_read_some(net::buffer(in), [&](error_code ec, std::size_t n) {
      EXPECT_FALSE(ec);
      got = n;
    });
    p.run_until([&] { return got > 0; });
    EXPECT_EQ(std::string(in, got), "hello");
    bool notified = false;
    p.server->expires_after(5s);
    p.server->async_close_notify([&](error_code) { notified = true; });
    p.run_until([&] { return notified; });
    EXPECT_TRUE(notified);
    error_code client_ec;
    p.client->read_some(net::buffer(in), client_ec);
    EXPECT_EQ(client_ec, net::error::eof) << client_ec.message();
  }
}

// Records read ahead into the session are not stranded: 50 records sent at
// once, read 7 bytes at a time, all come through without the socket having
// anything more to say (a stranded byte would end in the deadline).
TEST(ClientStream, RecordsReadAheadAreNotStrandedBehindASmallReadBuffer) {
  Fixture f;
  ASSERT_TRUE(f.pki.ok()) << f.pki.error();
  auto context = f.context();
  ASSERT_TRUE(context);
  TlsPair p(context);
  ASSERT_FALSE(p.handshake());
  std::string sent;
  for (int i = 0; i < 50; ++i) {
    const std::string record = "record-" + std::to_string(i) + ";";
    net::write(*p.client, net::buffer(record));  // one record each
    sent += record;
  }
  std::string got;
  error_code read_ec;
  p.server->expires_after(5s);
  char piece[7];
  std::function<void()> read_more = [&] {
    p.server->async_read_some(net::buffer(piece), [&](error_code ec, std::size_t n) {
      read_ec = ec;
      got.append(piece, n);
      if (!ec && got.size() < sent.size()) read_more();
    });
  };
  read_more();
  p.run_until([&] { return read_ec || got.size() == sent.size(); });
  EXPECT_FALSE(read_ec) << read_ec.message();
  EXPECT_EQ(got, sent);
}

// A client that does not read: the write that does not wait takes what it
// can (encrypted; the ciphertext beyond the socket's buffer waits), says so
// with flushed(), and takes nothing more until async_flush has sent it;
// everything arrives whole and in order once the client reads.
TEST(ClientStream, AStalledClientGetsEveryByteOnceItReadsAndNothingIsTakenMeanwhile) {
  Fixture f;
  ASSERT_TRUE(f.pki.ok()) << f.pki.error();
  auto context = f.context();
  ASSERT_TRUE(context);
  TlsPair p(context);
  ASSERT_FALSE(p.handshake());

  std::string chunk(TlsChannel::kMaxWriteBytes, '\0');
  std::string sent;
  error_code ec;
  for (int i = 0; i < 4096 && p.server->flushed(); ++i) {
    for (std::size_t j = 0; j < chunk.size(); ++j)
      chunk[j] = static_cast<char>('a' + (sent.size() + j) % 23);
    const std::size_t n = p.server->try_send(net::buffer(chunk), ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(n, chunk.size());  // consumed whole, sent or waiting
    sent += chunk;
  }
  ASSERT_FALSE(p.server->flushed()) << "the socket never filled";
  EXPECT_EQ(p.server->try_send(net::buffer(chunk), ec), 0u);
  EXPECT_FALSE(ec);

  std::string got;
  error_code client_ec;
  std::thread reader([&] {
    char in[16384];
    while (got.size() < sent.size()) {
      const std::size_t n = p.client->read_some(net::buffer(in), client_ec);
      if (client_ec) return;
      got.append(in, n);
    }
  });
  bool flushed = false;
  error_code flush_ec;
  p.server->expires_after(20s);
  p.server->async_flush([&](error_code e, std::size_t) {
    flush_ec = e;
    flushed = true;
  });
  p.run_until([&] { return flushed; });
  reader.join();
  EXPECT_FALSE(flush_ec) << flush_ec.message();
  EXPECT_TRUE(p.server->flushed());
  EXPECT_FALSE(client_ec) << client_ec.message();
  EXPECT_TRUE(got == sent) << "got " << got.size() << " of " << sent.size() << " bytes";
}

// The client's close_notify reads as EOF; a client gone without one as a
// truncated stream (Asio's errors, which the connection treats alike).
TEST(ClientStream, ACloseNotifyReadsAsEofAndAnAbruptCloseAsTruncated) {
  Fixture f;
  ASSERT_TRUE(f.pki.ok()) << f.pki.error();
  auto context = f.context();
  ASSERT_TRUE(context);
  for (const bool notify : {true, false}) {
    SCOPED_TRACE(notify ? "close_notify" : "abrupt");
    TlsPair p(context);
    ASSERT_FALSE(p.handshake());
    if (notify)
      p.client->async_shutdown([](error_code) {});  // close_notify out, then waits for ours
    else  // a FIN (a close would be a reset: the session tickets are unread)
      p.client->lowest_layer().shutdown(tcp::socket::shutdown_send);
    char in[16];
    bool done = false;
    error_code read_ec;
    p.server->expires_after(5s);
    p.server->async_read_some(net::buffer(in), [&](error_code ec, std::size_t) {
      read_ec = ec;
      done = true;
    });
    p.run_until([&] { return done; });
    if (notify)
      EXPECT_EQ(read_ec, net::error::eof) << read_ec.message();
    else
      EXPECT_EQ(read_ec, ssl::error::stream_truncated) << read_ec.message();
  }
}

TEST(ClientStream, TheDeadlineEndsAHandshakeThatStalls) {
  Fixture f;
  ASSERT_TRUE(f.pki.ok()) << f.pki.error();
  auto context = f.context();
  ASSERT_TRUE(context);
  TlsPair p(context);
  // The client connected and says nothing.
  error_code server_ec;
  const auto start = std::chrono::steady_clock::now();
  p.server->expires_after(200ms);
  bool done = false;
  p.server->async_handshake([&](error_code ec) {
    server_ec = ec;
    done = true;
  });
  p.run_until([&] { return done; });
  EXPECT_EQ(server_ec, boost::beast::error::timeout) << server_ec.message();
  EXPECT_TRUE(p.server->timed_out());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_FALSE(p.server->can_close_notify());
}

}  // namespace
}  // namespace sluice::proxy

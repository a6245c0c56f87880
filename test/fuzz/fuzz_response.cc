// Endpoint bytes as HttpSession relays them: a RelayResponseParser (no body
// limit, 64 KiB of headers) fed read by read, interim 1xx responses followed
// by a fresh parser on what is buffered, the body bytes of each read handed
// to the OutputTokenCounter and dropped (relayed), and the endpoint's close
// ending a body that has no length.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "chunker.h"
#include "protocol/output_tokens.h"
#include "protocol/proxy_parsers.h"

namespace http = boost::beast::http;

namespace {

constexpr int kMaxInterimResponses = 8;  // as HttpSession::on_interim_response

void start(std::optional<sluice::protocol::RelayResponseParser>& parser,
           sluice::protocol::ResponseHead& head) {
  parser.emplace(head);
  parser->body_limit(boost::none);
  parser->header_limit(64 * 1024);
  parser->eager(true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sluice::fuzz::Chunker reads(data, size);
  sluice::protocol::ResponseHead head;
  std::optional<sluice::protocol::RelayResponseParser> parser;
  sluice::protocol::OutputTokenCounter tokens;
  std::string buffer;  // the upstream connection's buffer
  int interim = 0;
  start(parser, head);
  for (;;) {
    auto& p = *parser;
    boost::beast::error_code ec;
    while (!buffer.empty() && !p.is_done()) {
      const std::size_t used = p.put(boost::asio::buffer(buffer), ec);
      buffer.erase(0, used);
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec || used == 0) break;
    }
    if (ec) return 0;  // upstream failure: 502 or a cut relay
    if (p.is_header_done()) {
      if (head.status / 100 == 1) {
        if (head.status == 101 || ++interim > kMaxInterimResponses) return 0;
        start(parser, head);  // the final response, from what is buffered
        continue;
      }
      if (head.unsupported_transfer_coding) return 0;
      if (!head.body.empty()) {
        tokens.feed(head.body);
        head.body.clear();  // relayed
      }
      if (p.is_done()) break;
    }
    if (reads.done()) {
      // The endpoint closed: a close-delimited body is complete now.
      if (p.got_some()) p.put_eof(ec);
      break;
    }
    const auto read = reads.next();
    buffer.append(read.data(), read.size());
  }
  (void)tokens.tokens();
  return 0;
}

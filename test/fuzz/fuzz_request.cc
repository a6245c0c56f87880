// Client bytes as HttpSession reads them: a ProxyRequestParser fed read by
// read (need_more keeps the unconsumed bytes for the next read), with the
// session's limits; each complete request's body goes through the OpenAI
// body parser with prompt capture and prefix hashing on, and the bytes after
// it start the next (pipelined) request, as on a kept-alive connection.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "chunker.h"
#include "protocol/openai_request.h"
#include "protocol/proxy_parsers.h"
#include "protocol/routes.h"
#include "scheduling/prefix_hasher.h"

namespace http = boost::beast::http;

namespace {

constexpr std::uint32_t kHeaderLimit = 16u << 10;
constexpr std::uint64_t kBodyLimit = 1u << 20;
constexpr int kMaxRequestsPerConnection = 16;

void handle_body(sluice::protocol::RequestHead& head) {
  (void)sluice::protocol::classify_target(head.target);
  (void)sluice::protocol::is_json_content_type(head.content_type);
  const sluice::scheduling::RequestPreparation prep{.prefix_hashes = true};
  std::string prompt;
  auto parsed = sluice::protocol::parse_openai_request(head.body, &prompt,
                                                       sluice::scheduling::prefix_text_limit(prep));
  if (!parsed.ok()) return;
  sluice::scheduling::Request request;
  sluice::scheduling::compute_prefix_hashes(prompt, parsed.request.model, prep, request,
                                            parsed.request.prompt_chars);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sluice::fuzz::Chunker reads(data, size);
  sluice::protocol::RequestHead head;
  std::optional<sluice::protocol::ProxyRequestParser> parser;
  std::string buffer;  // the session's client_buffer_
  int requests = 0;
  for (;;) {
    if (!parser) {
      parser.emplace(head);
      parser->header_limit(kHeaderLimit);
      parser->body_limit(kBodyLimit);
      parser->eager(true);
    }
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
    if (ec) return 0;  // the session answers 4xx and closes
    if (p.is_done()) {
      handle_body(head);
      if (!p.keep_alive() || ++requests == kMaxRequestsPerConnection) return 0;
      parser.reset();
      continue;
    }
    if (reads.done()) return 0;  // the client stopped sending: a timeout
    const auto read = reads.next();
    buffer.append(read.data(), read.size());
  }
}

// Exact usage for a stream (issue 41): a quota that charges input tokens
// needs the engine's count, which a stream carries only when the body asks
// (`stream_options.include_usage`, OpenAI's and every engine's). sluice
// asks on the client's behalf and, the client not having asked, takes the
// usage event out of the stream before the client sees it. Pure: tested
// without a socket.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::protocol {

// `body` (a JSON object without a top-level stream_options member) with
// `"stream_options":{"include_usage":true}` as its first member.
std::string body_with_stream_usage(std::string_view body);

// Removes from `body`'s first `whole` bytes (whole SSE events) each event
// that is a usage event: one data line whose JSON object has "choices" as
// an empty array and a "usage" object (what an engine sends last when
// include_usage is set). The rest is kept byte for byte. Returns the bytes
// removed.
std::size_t drop_usage_events(std::string& body, std::size_t whole);

}  // namespace sluice::protocol

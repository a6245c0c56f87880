// A model server's /metrics body as the scraper reads it. The first input
// byte picks the engine (vllm, sglang, trtllm-serve); the rest is the text.
// The parser's contract: never throws, never crashes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "datalayer/prometheus_text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static constexpr std::string_view kEngines[] = {"vllm", "sglang", "trtllm-serve"};
  const std::string_view engine = kEngines[data[0] % 3];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto m = sluice::datalayer::parse_engine_metrics(text, engine);
  (void)m.usable();
  return 0;
}

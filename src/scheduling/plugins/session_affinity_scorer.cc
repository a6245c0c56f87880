#include "scheduling/plugins/session_affinity_scorer.h"

namespace sluice::scheduling {

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
int decode_char(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (char c : in) {
    const int d = decode_char(c);
    if (d < 0) return {};
    acc = (acc << 6) | static_cast<unsigned>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

void SessionAffinityScorer::score(CycleState&, const Request& request,
                                  std::span<const Endpoint* const> candidates,
                                  std::span<double> scores) {
  const std::string address =
      request.session_token.empty() ? std::string() : base64_decode(request.session_token);
  for (std::size_t i = 0; i < candidates.size(); ++i)
    scores[i] = !address.empty() && candidates[i]->address == address ? 1.0 : 0.0;
}

void SessionAffinityScorer::pre_request(CycleState&, const Request&, SchedulingResult& result) {
  if (result.targets.empty()) return;
  result.response_headers.emplace_back(std::string(kSessionTokenHeader),
                                       base64_encode(result.targets.front()->address));
}

}  // namespace sluice::scheduling

#include "admin/admin_requests.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "sluice/extensions.h"

namespace sluice::admin {

using json = nlohmann::json;
using Reply = AdminReply;

namespace {
constexpr auto kReplace = json::error_handler_t::replace;
}  // namespace

Reply error_reply(int status, std::string_view code, const std::string& message) {
  return Reply{status, json{{"error", {{"message", message}, {"code", code}}}}.dump(-1, ' ', false,
                                                                                    kReplace)};
}

std::optional<std::size_t> limit_param(const std::string& target, std::size_t fallback,
                                       std::size_t most) {
  const auto q = target.find('?');
  if (q == std::string::npos) return fallback;
  std::string_view query(target);
  query.remove_prefix(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (kv.rfind("limit=", 0) != 0) continue;
    const std::string_view v = kv.substr(6);
    std::size_t n = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || ptr != v.data() + v.size() || n == 0 || n > most) return std::nullopt;
    return n;
  }
  return fallback;
}

namespace {

// The body as one JSON object, nothing before or after it: the JSON reader
// stops at a NUL byte as at the end, so `{...}\0garbage` would pass.
json parse_object(const std::string& body) {
  if (body.find('\0') != std::string::npos) return json(json::value_t::discarded);
  return json::parse(body, nullptr, /*allow_exceptions=*/false);
}

}  // namespace

std::optional<int> parse_priority(std::string_view text) {
  // Canonical only: "7", "-3", "0"; never "-0", "07", "+7" (two spellings
  // of one band would be two names for it in paths, logs and audits).
  const bool negative = !text.empty() && text[0] == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() || (digits[0] == '0' && (digits.size() > 1 || negative))) return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<registry::FlowOverride> parse_override(const std::string& body,
                                                     registry::FlowOverride o, Reply& error) {
  json j = parse_object(body);
  if (j.is_discarded() || !j.is_object()) {
    error = error_reply(400, "invalid-json", "body must be a JSON object");
    return std::nullopt;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "weight") {
      if (!v.is_number() || !(v.get<double>() >= config::kMinFlowWeight) ||
          v.get<double>() > config::kMaxFlowWeight) {
        error = error_reply(400, "invalid-field",
                            "weight must be a number at least 0.000001 and at most 1000000");
        return std::nullopt;
      }
      o.weight = v.get<double>();
    } else if (k == "priority") {
      if (!v.is_number_integer() || v.get<long long>() < -1000000 || v.get<long long>() > 1000000) {
        error = error_reply(400, "invalid-field", "priority must be a whole number");
        return std::nullopt;
      }
      o.priority = static_cast<int>(v.get<long long>());
    } else if (k == "maxQueued") {
      if (!v.is_number_unsigned()) {
        error = error_reply(400, "invalid-field",
                            "maxQueued must be a whole number >= 0 (0: no limit)");
        return std::nullopt;
      }
      if (v.get<std::uint64_t>() == 0)
        o.max_queued.reset();
      else
        o.max_queued = v.get<std::uint64_t>();
    } else {
      error = error_reply(400, "unknown-field",
                          "unknown field '" + k + "' (expected weight, priority, maxQueued)");
      return std::nullopt;
    }
  }
  if (j.empty()) {
    error = error_reply(400, "invalid-field",
                        "nothing to change (expected weight, priority, maxQueued)");
    return std::nullopt;
  }
  return o;
}

bool parse_band(const std::string& body, registry::BandConfig& c, Reply& error) {
  json j = parse_object(body);
  if (j.is_discarded() || !j.is_object()) {
    error = error_reply(400, "invalid-json", "body must be a JSON object");
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "maxBytes" || k == "maxRequests") {
      if (!v.is_number_unsigned()) {
        error = error_reply(400, "invalid-field", k + " must be a whole number >= 0 (0: no limit)");
        return false;
      }
      (k == "maxBytes" ? c.max_bytes : c.max_requests) = v.get<std::uint64_t>();
    } else if (k == "fairnessPolicy") {
      if (!v.is_string() ||
          !builtin_extensions().factory<flowcontrol::FairnessPolicy>(v.get<std::string>())) {
        error = error_reply(
            400, "invalid-field",
            "fairnessPolicy must be " + builtin_types_of(ExtensionKind::kFairnessPolicy));
        return false;
      }
      c.fairness = v.get<std::string>();
    } else if (k == "orderingPolicy") {
      if (!v.is_string() ||
          !builtin_extensions().factory<flowcontrol::OrderingPolicy>(v.get<std::string>())) {
        error = error_reply(
            400, "invalid-field",
            "orderingPolicy must be " + builtin_types_of(ExtensionKind::kOrderingPolicy));
        return false;
      }
      c.ordering = v.get<std::string>();
    } else if (k == "antiStarvationShare") {
      // -0.0 is not a share (it compares equal to 0 but is not 0).
      if (!v.is_number() || std::signbit(v.get<double>()) || v.get<double>() >= 1) {
        error =
            error_reply(400, "invalid-field", "antiStarvationShare must be at least 0 and below 1");
        return false;
      }
      c.share = v.get<double>();
    } else {
      error = error_reply(400, "unknown-field",
                          "unknown field '" + k +
                              "' (expected maxBytes, maxRequests, fairnessPolicy, orderingPolicy, "
                              "antiStarvationShare)");
      return false;
    }
  }
  return true;
}

}  // namespace sluice::admin

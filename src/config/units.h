// Parsing of the scalar units the config format uses: Go-style durations
// ("500ms", "1m30s") and Kubernetes quantities ("8Mi", "10Gi", "5000").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice::config {

// Go time.ParseDuration syntax: a sequence of decimal numbers with units
// ns, us (or µs), ms, s, m, h. "0" alone is accepted. Negative values are not.
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text);

// Kubernetes resource.Quantity syntax restricted to non-negative integral
// results: binary suffixes Ki..Ei, decimal k, M, G, T, P, E, plain integers,
// decimal fractions when the result is whole ("1.5Ki" = 1536).
std::optional<std::uint64_t> parse_quantity(std::string_view text);

// "host:port" with a numeric port (0..65535). The host may be a name, an IPv4
// address or a bracketed IPv6 address.
struct HostPort {
  std::string_view host;
  std::uint16_t port = 0;
};
std::optional<HostPort> parse_host_port(std::string_view text);

}  // namespace sluice::config

// Parsing of the scalar units the config format uses: Go-style durations
// ("500ms", "1m30s") and Kubernetes quantities ("8Mi", "10Gi", "5000").
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::config {

// Go time.ParseDuration syntax: a sequence of decimal numbers with units
// ns, us (or µs), ms, s, m, h. "0" alone is accepted. Negative values are not.
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text);

// Kubernetes resource.Quantity syntax restricted to non-negative integral
// results: binary suffixes Ki..Ei, decimal k, M, G, T, P, E, plain integers,
// decimal fractions when the result is whole ("1.5Ki" = 1536).
std::optional<std::uint64_t> parse_quantity(std::string_view text);

// A decimal amount of money (quota costs and prices) in micro-units (1e-6),
// exactly: digits, an optional fraction, an optional decimal suffix m, k, M,
// G or T ("500", "0.25", "500m" = 0.5, "1.5k"). nullopt when the value has
// more than 6 decimals, no digits, another suffix, or does not fit 64 bits.
std::optional<std::uint64_t> parse_micro_units(std::string_view text);
// micro-units as the shortest decimal parse_micro_units reads back ("0.25").
std::string format_micro_units(std::uint64_t micros);

// "host:port" with a numeric port (0..65535). The host may be a name, an IPv4
// address or a bracketed IPv6 address.
struct HostPort {
  std::string_view host;
  std::uint16_t port = 0;
};
std::optional<HostPort> parse_host_port(std::string_view text);

// An address block: "10.0.0.0/8", "::1/128", or a bare address (all its
// bits). IPv4 blocks are kept as IPv4-mapped IPv6 (::ffff:a.b.c.d), so one
// comparison covers a peer of either family. The address's bits past the
// prefix must be zero ("10.0.0.1/8" is refused: it is likely a typo).
struct Cidr {
  std::array<unsigned char, 16> address{};
  int prefix = 128;
  bool operator==(const Cidr&) const = default;
};
std::optional<Cidr> parse_cidr(std::string_view text);
// `address` (16 bytes, IPv4 mapped) is inside `block`.
bool cidr_contains(const Cidr& block, const std::array<unsigned char, 16>& address);

}  // namespace sluice::config

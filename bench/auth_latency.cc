// What authenticating adds to a request, at the tail: the I/O thread's one
// call, auth::Authenticator::authenticate (bearer parsing, the key lookup or
// the token cache or a first verification, the tenant's policy), timed call
// by call, and its p50/p99/p99.9 per kind of credential. Interleaved: each
// round runs every kind once in turn, so a slow moment of the machine lands
// on all of them alike. Prints a markdown table (docs/benchmarks/auth.md).
//
//   auth_latency [ROUNDS] [CALLS_PER_ROUND]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "auth/authenticator.h"
#include "config/config.h"
#include "support/jwt_signer.h"

namespace {

using Clock = std::chrono::steady_clock;
using sluice::auth::JwtAlg;

constexpr std::int64_t kNow = 1'800'000'000;

std::string claims(const std::string& sub, int serial) {
  return R"({"iss":"https://login.example.com/v2.0","aud":"api://sluice","sub":")" + sub +
         R"(","exp":)" + std::to_string(kNow + 3600) + R"(,"iat":)" + std::to_string(kNow - 10) +
         R"(,"jti":"b0f3c9a2-7d6e-4b1a-9c8d-)" + std::to_string(100000000000 + serial) +
         R"(","scope":"inference.read inference.write","tier":"standard"})";
}

struct Series {
  const char* name;
  std::vector<double> ns;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 2000;
  auto rsa = sluice::test::generate_key(JwtAlg::kRS256, "rsa-1");
  auto ec = sluice::test::generate_key(JwtAlg::kES256, "ec-1");
  std::string error;
  auto jwks = sluice::auth::Jwks::parse(
      sluice::test::jwks_of(std::vector<const sluice::test::SigningKey*>{&rsa, &ec}), error);
  auto config = sluice::config::load_config_string(R"(
objectives: [{name: standard, priority: 0}, {name: interactive, priority: 10}]
auth:
  apiKeys: {file: /dev/null}
  jwt: {jwksFile: /dev/null, issuer: "https://login.example.com/v2.0", audiences: ["api://sluice"],
        objectiveClaim: tier}
tenants:
  - {id: acme, maxObjective: standard, models: [llama-3-8b], maxConcurrency: 64}
  - {id: "*", maxConcurrency: 8}
)");
  // 10 000 keys in the store, as a busy deployment has.
  std::vector<sluice::auth::KeyRecord> records;
  std::string key;
  for (int i = 0; i < 10000; ++i) {
    auto k = sluice::auth::generate_key(i == 4242 ? "acme" : "t" + std::to_string(i),
                                        "key_" + std::to_string(i));
    if (i == 4242) key = k->key;
    records.push_back(k->record);
  }
  auto store = std::make_shared<sluice::auth::KeyStore>(std::move(records));
  const sluice::auth::Authenticator a(config, store, jwks);
  sluice::auth::TokenCache cache(4096);
  const std::string key_header = "Bearer " + key;
  const std::string cached_header = "Bearer " + sluice::test::make_token(ec, claims("acme", 0));
  // Fresh tokens for the first-seen kinds: one per call, signed beforehand.
  auto fresh = [&](const sluice::test::SigningKey& k, int n, int base) {
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i)
      v.push_back("Bearer " + sluice::test::make_token(k, claims("acme", base + i)));
    return v;
  };
  const int first_calls = std::max(1, calls / 20);  // signing is the slow part of this program
  std::vector<Series> series = {{"API key (10 000 keys)", {}},
                                {"JWT, cached", {}},
                                {"JWT RS256, first seen", {}},
                                {"JWT ES256, first seen", {}}};
  sluice::auth::Identity id;
  auto run = [&](Series& s, const std::string& header) {
    const auto t0 = Clock::now();
    const auto out = a.authenticate({header, 1, {}}, kNow, id, &cache);
    const auto t1 = Clock::now();
    if (!out.ok()) {
      std::fprintf(stderr, "refused: %.*s\n", static_cast<int>(out.reason.size()),
                   out.reason.data());
      std::exit(1);
    }
    s.ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  };
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < calls; ++i) run(series[0], key_header);
    for (int i = 0; i < calls; ++i) run(series[1], cached_header);
    for (const auto& h : fresh(rsa, first_calls, r * 100000)) run(series[2], h);
    for (const auto& h : fresh(ec, first_calls, r * 100000 + 50000)) run(series[3], h);
  }
  std::printf("| credential | calls | p50 µs | p99 µs | p99.9 µs |\n|---|---:|---:|---:|---:|\n");
  for (const auto& s : series)
    std::printf("| %s | %zu | %.2f | %.2f | %.2f |\n", s.name, s.ns.size(),
                percentile(s.ns, 0.5) / 1000, percentile(s.ns, 0.99) / 1000,
                percentile(s.ns, 0.999) / 1000);
  return 0;
}

// Identity micro-benchmarks (Google Benchmark): what the I/O thread pays per
// request to know who it is.
//
//   BM_ApiKeyLookup/N          SHA-256 of a 51-byte API key and a lookup in
//                              a hash map of N key digests
//   BM_TokenCacheHit/N         a JWT already verified: SHA-256 of the token
//                              and TokenCache::find, N entries cached
//   BM_VerifyFirstSeen/A       a JWT not seen before: verify_jwt, decoding,
//                              both JSON parses, the claims and the signature
//                              (A: 0 RS256, 1 ES256, 2 EdDSA)
//   BM_VerifyUnknownKid        the cheap refusal in front of the signature
//                              check (what a flood of made-up tokens costs)
//   BM_VerifyBadSignature/A    a refusal that does reach the signature check
//
// The tokens are realistic access tokens (iss, aud, sub, objective, times,
// jti, scope; 600-750 bytes), signed at startup by test/support/jwt_signer.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "auth/crypto.h"
#include "auth/jwks.h"
#include "auth/jwt.h"
#include "auth/token_cache.h"
#include "support/jwt_signer.h"

namespace {

using sluice::auth::JwtAlg;
using sluice::auth::JwtError;
using sluice::test::SigningKey;

constexpr std::int64_t kNow = 1'700'000'000;

struct Fixture {
  SigningKey rsa = sluice::test::generate_key(JwtAlg::kRS256, "rsa-2024-01");
  SigningKey ec = sluice::test::generate_key(JwtAlg::kES256, "ec-2024-01");
  SigningKey ed = sluice::test::generate_key(JwtAlg::kEdDSA, "ed-2024-01");
  std::shared_ptr<const sluice::auth::Jwks> jwks;
  sluice::auth::JwtOptions options;

  Fixture() {
    std::string error;
    jwks = sluice::auth::Jwks::parse(sluice::test::jwks_of({&rsa, &ec, &ed}), error);
    options.issuer = "https://login.example.com/tenant-directory/v2.0";
    options.audiences = {"api://sluice-gateway"};
    options.objective_claim = "objective";
  }
  const SigningKey& key(int which) const { return which == 0 ? rsa : which == 1 ? ec : ed; }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

std::string claims(int serial) {
  return R"({"iss":"https://login.example.com/tenant-directory/v2.0",)"
         R"("aud":["api://sluice-gateway","api://other"],"sub":"org:acme/team-42",)"
         R"("objective":"interactive-chat","iat":1699999900,"nbf":1699999900,"exp":1700003500,)"
         R"("jti":"3f2a9c1e-7b4d-4e8a-9c2f-)" +
         std::to_string(100000000000 + serial) +
         R"(","scope":"inference.completions inference.embeddings models.read",)"
         R"("azp":"0f6e8a2b-1c3d-4e5f-8a9b-0c1d2e3f4a5b","ver":"2.0"})";
}

std::string token(int which, int serial = 0) {
  return sluice::test::make_token(fixture().key(which), claims(serial));
}

void BM_ApiKeyLookup(benchmark::State& state) {
  // sk-... keys as clients send them: 51 bytes.
  const auto key_of = [](int i) {
    std::string k = "sk-live-" + std::to_string(1000000 + i);
    k.resize(51, 'x');
    return k;
  };
  struct Hash {
    std::size_t operator()(const sluice::auth::Digest& d) const {
      std::size_t h;
      std::memcpy(&h, d.data(), sizeof h);
      return h;
    }
  };
  std::unordered_map<sluice::auth::Digest, int, Hash> table;
  for (int i = 0; i < state.range(0); ++i) table.emplace(sluice::auth::sha256(key_of(i)), i);
  const std::string presented = key_of(static_cast<int>(state.range(0)) / 2);
  for (auto _ : state) {
    const auto it = table.find(sluice::auth::sha256(presented));
    benchmark::DoNotOptimize(it);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ApiKeyLookup)->Arg(10)->Arg(10000);

void BM_TokenCacheHit(benchmark::State& state) {
  sluice::auth::TokenCache cache(4096);
  const auto& f = fixture();
  sluice::auth::VerifiedToken verified;
  std::string presented;
  for (int i = 0; i < state.range(0); ++i) {
    // Distinct tokens (jti) from one key: EdDSA signs fast.
    const std::string t = token(2, i);
    if (sluice::auth::verify_jwt(t, *f.jwks, f.options, kNow, verified) != JwtError::kNone)
      state.SkipWithError("a benchmark token does not verify");
    cache.insert(sluice::auth::TokenCache::key_of(t), verified, kNow);
    if (i == state.range(0) / 2) presented = t;
  }
  state.counters["token_bytes"] = static_cast<double>(presented.size());
  for (auto _ : state) {
    const auto* hit = cache.find(sluice::auth::TokenCache::key_of(presented), kNow);
    if (!hit) state.SkipWithError("miss");
    benchmark::DoNotOptimize(hit);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TokenCacheHit)->Arg(16)->Arg(4096);

void BM_VerifyFirstSeen(benchmark::State& state) {
  const auto& f = fixture();
  const std::string t = token(static_cast<int>(state.range(0)));
  state.SetLabel(std::string(sluice::auth::to_string(f.key(static_cast<int>(state.range(0))).alg)));
  state.counters["token_bytes"] = static_cast<double>(t.size());
  sluice::auth::VerifiedToken out;
  for (auto _ : state) {
    if (sluice::auth::verify_jwt(t, *f.jwks, f.options, kNow, out) != JwtError::kNone)
      state.SkipWithError("the token does not verify");
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_VerifyFirstSeen)->Arg(0)->Arg(1)->Arg(2);

void BM_VerifyUnknownKid(benchmark::State& state) {
  const auto& f = fixture();
  const SigningKey stranger{JwtAlg::kRS256, "made-up", nullptr};
  const std::string t =
      sluice::test::sign_token(f.rsa, sluice::test::default_header(stranger), claims(0));
  sluice::auth::VerifiedToken out;
  for (auto _ : state) {
    if (sluice::auth::verify_jwt(t, *f.jwks, f.options, kNow, out) != JwtError::kUnknownKey)
      state.SkipWithError("not an unknown kid");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_VerifyUnknownKid);

void BM_VerifyBadSignature(benchmark::State& state) {
  const auto& f = fixture();
  std::string t = token(static_cast<int>(state.range(0)));
  t[t.size() - 3] = t[t.size() - 3] == 'A' ? 'B' : 'A';
  sluice::auth::VerifiedToken out;
  for (auto _ : state) {
    if (sluice::auth::verify_jwt(t, *f.jwks, f.options, kNow, out) != JwtError::kBadSignature)
      state.SkipWithError("not a bad signature");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_VerifyBadSignature)->Arg(0)->Arg(1)->Arg(2);

}  // namespace

BENCHMARK_MAIN();

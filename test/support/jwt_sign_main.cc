// sluice-jwt-sign: tokens and key sets for integration tests and benchmarks
// (not installed). Three modes:
//
//   sluice-jwt-sign --generate RS256|ES256|EdDSA
//       prints a fresh PEM private key (RSA-2048, P-256 or Ed25519)
//   sluice-jwt-sign --key KEY.pem [--kid KID] [--header JSON] PAYLOAD_JSON|-
//       prints a token signed with the key (its algorithm follows from the
//       key type); the header defaults to {"alg":..,"typ":"JWT","kid":KID};
//       "-" reads the payload from stdin
//   sluice-jwt-sign --jwks KEY.pem [--kid KID] [--jwks KEY2.pem [--kid KID2]]...
//       prints {"keys":[...]} with the public JWK of each key (PEM public or
//       private), each --kid naming the key before it
//
// Exit 0 with the result and a newline on stdout, 2 with a message on
// stderr for a usage or key error.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "support/jwt_signer.h"

namespace {

using sluice::test::SigningKey;

int usage(const std::string& why) {
  std::cerr << "sluice-jwt-sign: " << why
            << "\nusage: sluice-jwt-sign --generate RS256|ES256|EdDSA\n"
               "       sluice-jwt-sign --key KEY.pem [--kid KID] [--header JSON] PAYLOAD_JSON|-\n"
               "       sluice-jwt-sign --jwks KEY.pem [--kid KID] [--jwks KEY2.pem ...]\n";
  return 2;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

int generate(const std::string& alg_name) {
  const auto alg = sluice::auth::parse_alg(alg_name);
  if (!alg) return usage("--generate takes RS256, ES256 or EdDSA");
  const SigningKey key = sluice::test::generate_key(*alg, "");
  std::cout << sluice::test::private_pem(key.key.get());
  return 0;
}

struct Args {
  std::string key_path, kid, header, payload;
  bool has_header = false, has_payload = false;
  std::vector<std::pair<std::string, std::string>> jwks;  // path, kid
};

int sign(const Args& a) {
  std::string pem, error;
  if (!read_file(a.key_path, pem)) return usage("cannot read " + a.key_path);
  const SigningKey key = sluice::test::load_private_pem(pem, a.kid, error);
  if (!error.empty()) return usage(a.key_path + ": " + error);
  std::string payload = a.payload;
  if (payload == "-") {
    std::ostringstream in;
    in << std::cin.rdbuf();
    payload = in.str();
  }
  const std::string header = a.has_header ? a.header : sluice::test::default_header(key);
  std::cout << sluice::test::sign_token(key, header, payload) << "\n";
  return 0;
}

int jwks(const Args& a) {
  std::vector<std::string> jwks;
  for (const auto& [path, kid] : a.jwks) {
    std::string pem, error;
    if (!read_file(path, pem)) return usage("cannot read " + path);
    const auto key = sluice::test::load_any_pem(pem, error);
    if (!key) return usage(path + ": " + error);
    jwks.push_back(sluice::test::public_jwk(key.get(), kid));
  }
  std::cout << sluice::test::jwks_of(jwks) << "\n";
  return 0;
}

int run(const std::vector<std::string>& argv) {
  Args a;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    const bool has_value = i + 1 < argv.size();
    if (arg == "--generate" && has_value) return generate(argv[i + 1]);
    if (arg == "--key" && has_value) {
      a.key_path = argv[++i];
    } else if (arg == "--jwks" && has_value) {
      a.jwks.emplace_back(argv[++i], "");
    } else if (arg == "--kid" && has_value) {
      (a.jwks.empty() ? a.kid : a.jwks.back().second) = argv[++i];
    } else if (arg == "--header" && has_value) {
      a.header = argv[++i];
      a.has_header = true;
    } else if (!a.has_payload && (arg == "-" || arg.substr(0, 2) != "--")) {
      a.payload = arg;
      a.has_payload = true;
    } else {
      return usage("unexpected argument '" + arg + "'");
    }
  }
  if (!a.jwks.empty() && a.key_path.empty() && !a.has_payload) return jwks(a);
  if (!a.key_path.empty() && a.jwks.empty() && a.has_payload) return sign(a);
  return usage("give --generate, --key with a payload, or --jwks");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "sluice-jwt-sign: " << e.what() << "\n";
    return 2;
  }
}

// Admission's first step: who the request is, on its head alone (before
// the body is read or held). Without auth: and trustedProxies the steering
// headers stand (GIE's behaviour); from a trusted proxy the fairness id
// names the tenant, whose policy holds; otherwise, with auth:, the
// credentials name the tenant (auth::Authenticator), and a request without
// valid ones is answered 401 (400 for a repeated Authorization header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "admission/request.h"
#include "auth/authenticator.h"
#include "auth/token_cache.h"

namespace sluice::admission {

// What identify() reads besides the request. Read-only, but for the
// calling I/O thread's token cache.
struct IdentityContext {
  explicit IdentityContext(const auth::Authenticator& a) : authenticator(a) {}
  const auth::Authenticator& authenticator;
  // Wall-clock unix seconds (key expiry, a JWT's exp and nbf); read only
  // when credentials are checked, so a caller may pass 0 with auth: off.
  std::int64_t now_unix = 0;
  auth::TokenCache* token_cache = nullptr;  // may be null
  // The TCP peer is in auth.trustedProxies. The caller need only ask (a
  // system call) when !authenticator.headers_trusted_by_default().
  bool peer_trusted = false;
  std::string_view client_certificate_name;  // verified, or ""
  // The whole request was read: a refusal then keeps the connection.
  bool body_read = false;
  // agent-identity's session headers, in order (empty: not declared).
  std::span<const std::string> agent_session_headers;
  std::size_t max_fairness_id_bytes = 0;  // server.maxFairnessIdBytes
};

struct IdentityOutcome {
  Verdict verdict;
  // "" unless credentials were checked: "ok", or the failure's reason (the
  // caller counts it).
  std::string_view auth_result;
  // A JWT named a key the JWKS lacks: the caller asks for the JWKS again.
  bool jwks_refetch = false;
};

// Settles r.identity (cleared first) and, where the headers do not stand,
// the steering values: a request that is neither from a trusted proxy nor
// authenticated loses its fairness id and objective; agent-identity's
// session header names the flow of a request that names none, only where
// the steering headers stand.
IdentityOutcome identify(const IdentityContext& c, Request& r);

// Its credentials were checked (a key, a JWT, a client certificate): the
// client's Authorization is sluice's, never forwarded.
bool authenticated(const auth::Identity& id);

// The request is held to a tenant's policy: authenticated, or from a
// trusted proxy that named a tenant with a policy.
bool under_tenant_policy(const auth::Identity& id);

}  // namespace sluice::admission

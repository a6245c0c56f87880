#include "admission/identity.h"

#include <algorithm>
#include <cctype>

#include "protocol/steering.h"

namespace sluice::admission {

namespace {

using flowcontrol::client_error;

// The value of the first field named `name` (lower case) in a block of
// "Name: value\r\n" lines, without surrounding blanks; empty if none.
std::string_view header_value(std::string_view block, std::string_view name) {
  while (!block.empty()) {
    const auto eol = block.find("\r\n");
    const std::string_view line = block.substr(0, eol);
    block = eol == std::string_view::npos ? std::string_view() : block.substr(eol + 2);
    const auto colon = line.find(':');
    if (colon != name.size()) continue;
    const bool same = std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
      return a == std::tolower(static_cast<unsigned char>(b));
    });
    if (!same) continue;
    std::string_view v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    if (!v.empty()) return v;
  }
  return {};
}

// agent-identity (llm-d's): a request that names no flow takes the first
// agent session header's value as its fairness id. Only where the steering
// headers themselves stand (auth off, or a trusted proxy's request under no
// tenant policy): an authenticated tenant's flow is the tenant's, and a
// header must not move it. A value that is not a valid fairness id, or
// (from a trusted proxy) that names a tenant, is ignored (the request stays
// in the default flow) rather than refused: the client did not ask for a
// flow.
void adopt_agent_identity(const IdentityContext& c, Request& r) {
  if (c.agent_session_headers.empty() || !r.head.fairness_id.empty()) return;
  for (const auto& h : c.agent_session_headers) {
    const std::string_view v = header_value(r.head.forward_headers, h);
    if (v.empty()) continue;
    if (!protocol::is_valid_steering_value(v, c.max_fairness_id_bytes)) return;
    // From a trusted proxy a flow id names a tenant: a session's must not
    // land in a tenant's flows ("acme", "acme/ui").
    if (r.identity.source == auth::Source::kTrustedProxy &&
        c.authenticator.tenants().find(v.substr(0, v.find('/'))))
      return;
    r.head.fairness_id.assign(v);
    return;
  }
}

// A trusted proxy decided who the tenant is, not what the tenant may do:
// its fairness id names the tenant ("acme", or "acme/ui" for acme's
// sub-flow ui; none: default-flow), and that tenant's policy (or "*"'s)
// holds. Without a policy for it the fairness id stands as sent.
void adopt_proxied_tenant(const IdentityContext& c, Request& r) {
  r.identity.source = auth::Source::kTrustedProxy;
  const std::string_view id = r.head.fairness_id;
  // An id that is not a valid steering value is refused with its 400 by
  // the steering check; here it names nobody.
  const bool valid = !id.empty() && protocol::is_valid_steering_value(id, c.max_fairness_id_bytes);
  std::string_view tenant = valid ? id.substr(0, id.find('/')) : std::string_view();
  if (tenant.empty()) tenant = "default-flow";
  r.identity.policy = c.authenticator.tenants().find(tenant);
  if (r.identity.policy) r.identity.tenant.assign(tenant);
}

flowcontrol::ErrorAnswer credentials_refused(const IdentityContext& c,
                                             const auth::AuthOutcome& out) {
  flowcontrol::ErrorAnswer ans;
  if (out.failure == auth::AuthFailure::kRepeated) {
    ans = client_error(400, "repeated_authorization_header",
                       "the Authorization header was sent more than once; send it once");
  } else {
    // OpenAI's answer to a bad key, so SDKs raise their AuthenticationError.
    ans = client_error(401, "invalid_api_key",
                       out.failure == auth::AuthFailure::kMissing
                           ? "You didn't provide an API key. Send it as Authorization: Bearer KEY."
                           : "Incorrect API key provided.");
    ans.www_authenticate = "Bearer realm=\"" + c.authenticator.realm() + "\"";
    if (out.failure != auth::AuthFailure::kMissing)
      ans.www_authenticate += ", error=\"invalid_token\"";
  }
  ans.reason = out.reason;
  // The body was not read yet, or not all of it: the connection closes.
  if (!c.body_read) ans.close_connection = true;
  return ans;
}

}  // namespace

// Without auth: and trustedProxies, the steering headers stand (GIE's
// behaviour). Otherwise they stand only from a trusted proxy; any other
// request is authenticated (auth:) or loses them (trustedProxies alone).
IdentityOutcome identify(const IdentityContext& c, Request& r) {
  r.identity.clear();
  const auth::Authenticator& a = c.authenticator;
  if (a.headers_trusted_by_default()) {
    adopt_agent_identity(c, r);
    return {};
  }
  if (c.peer_trusted) {
    adopt_proxied_tenant(c, r);
    // The proxy named the tenant (or none: default-flow); a session header
    // never picks a tenant, and under a tenant's policy its flow holds.
    if (!r.identity.policy) adopt_agent_identity(c, r);
    return {};
  }
  if (!a.enabled()) {
    r.head.fairness_id.clear();
    r.head.objective.clear();
    return {};
  }
  const auth::Credentials creds{r.head.authorization, r.head.authorization_count,
                                c.client_certificate_name};
  const auth::AuthOutcome out = a.authenticate(creds, c.now_unix, r.identity, c.token_cache);
  IdentityOutcome o;
  o.auth_result = out.ok() ? std::string_view("ok") : out.reason;
  o.jwks_refetch = out.unknown_key;
  if (!out.ok()) o.verdict = Verdict::refuse(credentials_refused(c, out));
  return o;
}

bool authenticated(const auth::Identity& id) {
  return id.source == auth::Source::kApiKey || id.source == auth::Source::kJwt ||
         id.source == auth::Source::kClientCertificate;
}

bool under_tenant_policy(const auth::Identity& id) {
  return authenticated(id) || (id.source == auth::Source::kTrustedProxy && id.policy != nullptr);
}

}  // namespace sluice::admission

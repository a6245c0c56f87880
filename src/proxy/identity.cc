// Who the request is, and what its tenant may do: the admission steps of
// auth (auth/authenticator.h) and tenant policy (auth/tenants.h). The head
// is enough to authenticate, so a request without valid credentials is
// refused before its body is read (and before the body budget holds it).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <string_view>

#include "observe/log.h"
#include "protocol/engine_priority.h"
#include "protocol/steering.h"
#include "proxy/client_connection.h"
#include "proxy/exchange.h"

namespace sluice::proxy {

using flowcontrol::client_error;

namespace {

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The peer's address as 16 bytes (IPv4 mapped), for trustedProxies.
std::array<unsigned char, 16> peer_bytes(const Socket& s) {
  std::array<unsigned char, 16> out{};
  boost::system::error_code ec;
  const auto ep = s.remote_endpoint(ec);
  if (ec) return out;
  const auto a = ep.address();
  out = a.is_v4()
            ? boost::asio::ip::make_address_v6(boost::asio::ip::v4_mapped, a.to_v4()).to_bytes()
            : a.to_v6().to_bytes();
  return out;
}

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

}  // namespace

// agent-identity (llm-d's): a request that names no flow takes the first
// agent session header's value as its fairness id. Only where the steering
// headers themselves stand (auth off, or a trusted proxy's request under no
// tenant policy): an authenticated tenant's flow is the tenant's, and a
// header must not move it. A value that is not a valid fairness id, or
// (from a trusted proxy) that names a tenant, is ignored (the request stays
// in the default flow) rather than refused: the client did not ask for a
// flow.
void Exchange::adopt_agent_identity() {
  const auto& headers = thread_.policy().agent_session_headers;
  if (headers.empty() || !request_.fairness_id.empty()) return;
  for (const auto& h : headers) {
    const std::string_view v = header_value(request_.forward_headers, h);
    if (v.empty()) continue;
    if (!protocol::is_valid_steering_value(v, ctx_.config.server.max_fairness_id_bytes)) return;
    // From a trusted proxy a flow id names a tenant: a session's must not
    // land in a tenant's flows ("acme", "acme/ui").
    if (identity_.source == auth::Source::kTrustedProxy &&
        thread_.authenticator().tenants().find(v.substr(0, v.find('/'))))
      return;
    request_.fairness_id.assign(v);
    return;
  }
}

// The head is read: the request begins (its route, its id), and who sent it
// is settled.
bool Exchange::on_head() {
  route_ = protocol::classify_target(request_.target);
  // requestHandler.parsers: passthrough-parser takes what no parser before
  // it claims (every inference path when it is the only parser).
  const RequestPolicy& policy = thread_.policy();
  if ((route_ == protocol::Route::kUnknown && policy.passthrough &&
       request_.target.starts_with('/')) ||
      (protocol::is_inference(route_) && !policy.parse_openai))
    route_ = protocol::Route::kPassthrough;
  begin_request(/*head_read=*/true);
  assign_request_id();
  return check_identity();
}

bool Exchange::peer_trusted() {
  if (peer_trusted_ < 0) {
    const auto& a = thread_.authenticator();
    peer_trusted_ = a.trusted(peer_bytes(conn_.client_.socket())) ? 1 : 0;
  }
  return peer_trusted_ == 1;
}

bool Exchange::authenticated() const {
  return identity_.source == auth::Source::kApiKey || identity_.source == auth::Source::kJwt ||
         identity_.source == auth::Source::kClientCertificate;
}

// Without auth: and trustedProxies, the steering headers stand (GIE's
// behaviour). Otherwise they stand only from a trusted proxy; any other
// request is authenticated (auth:) or loses them (trustedProxies alone).
bool Exchange::check_identity() {
  identity_.clear();
  const auth::Authenticator& a = thread_.authenticator();
  if (a.headers_trusted_by_default()) {
    adopt_agent_identity();
    return true;
  }
  if (peer_trusted()) {
    adopt_proxied_tenant();
    // The proxy named the tenant (or none: default-flow); a session header
    // never picks a tenant, and under a tenant's policy its flow holds.
    if (!identity_.policy) adopt_agent_identity();
    return true;
  }
  if (!a.enabled()) {
    request_.fairness_id.clear();
    request_.objective.clear();
    return true;
  }
  const auth::Credentials c{request_.authorization, request_.authorization_count,
                            conn_.client_certificate_name()};
  const auth::AuthOutcome out = a.authenticate(c, unix_now(), identity_, thread_.token_cache());
  thread_.stats().auth_result(out.ok() ? std::string_view("ok") : out.reason);
  if (out.unknown_key) ctx_.want_jwks_refetch();
  if (out.ok()) return true;
  refuse_credentials(out);
  return false;
}

// A trusted proxy decided who the tenant is, not what the tenant may do:
// its fairness id names the tenant ("acme", or "acme/ui" for acme's
// sub-flow ui; none: default-flow), and that tenant's policy (or "*"'s)
// holds. Without a policy for it the fairness id stands as sent.
void Exchange::adopt_proxied_tenant() {
  identity_.source = auth::Source::kTrustedProxy;
  const std::string_view id = request_.fairness_id;
  // An id that is not a valid steering value is refused with its 400 in
  // check_steering; here it names nobody.
  const bool valid = !id.empty() && protocol::is_valid_steering_value(
                                        id, ctx_.config.server.max_fairness_id_bytes);
  std::string_view tenant = valid ? id.substr(0, id.find('/')) : std::string_view();
  if (tenant.empty()) tenant = "default-flow";
  identity_.policy = thread_.authenticator().tenants().find(tenant);
  if (identity_.policy) identity_.tenant = std::string(tenant);
}

bool Exchange::has_tenant_policy() const {
  return authenticated() ||
         (identity_.source == auth::Source::kTrustedProxy && identity_.policy != nullptr);
}

void Exchange::refuse_credentials(const auth::AuthOutcome& out) {
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
    ans.www_authenticate = "Bearer realm=\"" + thread_.authenticator().realm() + "\"";
    if (out.failure != auth::AuthFailure::kMissing)
      ans.www_authenticate += ", error=\"invalid_token\"";
  }
  ans.reason = out.reason;
  // The body was not read yet, or not all of it: the connection closes.
  if (request_parser_ && !request_parser_->is_done()) ans.close_connection = true;
  answer(ans);
}

// The tenant's policy on an inference request: its model, its objective
// (the token's, else the header's, else the tenant's default; clamped or
// refused above what it may use), its max_tokens ceiling, its concurrency,
// and its flow (the tenant's own, or one of its sub-flows).
bool Exchange::check_tenant_policy(protocol::OpenAIRequest& req) {
  if (!has_tenant_policy()) return true;
  const auth::TenantPolicy* p = identity_.policy;
  const std::string_view asked =
      !identity_.objective.empty() ? std::string_view(identity_.objective) : request_.objective;
  if (p && !auth::Tenants::model_allowed(*p, req.model)) {
    auto a =
        client_error(403, "model_not_allowed",
                     "tenant '" + identity_.tenant + "' may not use model '" + req.model + "'");
    a.reason = "model-not-allowed";
    answer(a);
    return false;
  }
  std::string objective(asked);
  if (p) {
    auto d = thread_.authenticator().tenants().decide_objective(*p, asked);
    if (d.refused) {
      auto a = client_error(
          403, "objective_not_allowed",
          "tenant '" + identity_.tenant + "' may not use objective '" + std::string(asked) + "'");
      a.reason = "objective-not-allowed";
      answer(a);
      return false;
    }
    objective = std::move(d.objective);
    if (!apply_max_tokens(*p, req) || !take_tenant_permit(*p)) return false;
  }
  request_.objective = std::move(objective);
  // The sub-flow asked for: the fairness id of an authenticated request
  // ("ui"), what follows the tenant in a trusted proxy's ("acme/ui").
  std::string_view subflow = request_.fairness_id;
  if (identity_.source == auth::Source::kTrustedProxy) {
    const auto slash = subflow.find('/');
    subflow = slash == std::string_view::npos ? std::string_view() : subflow.substr(slash + 1);
  }
  request_.fairness_id = auth::Tenants::flow_for(p, identity_.tenant, subflow);
  return true;
}

// The tenant's max_tokens ceiling holds for every output-token limit the
// body carries (max_tokens, max_completion_tokens, max_output_tokens: each
// engine reads a different one first), every occurrence counted. Above it:
// 400, or each limit present rewritten to at most the ceiling; a body that
// names none (or only null) gets the ceiling, in the member its route's
// engines read.
bool Exchange::apply_max_tokens(const auth::TenantPolicy& p, protocol::OpenAIRequest& req) {
  if (p.max_tokens == 0 || route_ == protocol::Route::kEmbeddings) return true;
  const auto ceiling = static_cast<std::int64_t>(p.max_tokens);
  const auto& limits = req.output_limits;
  bool rewrite = !req.max_tokens;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    rewrite = rewrite || limits[i].has_null || limits[i].max > ceiling;
    if (limits[i].max > ceiling && p.refuse_above_max_tokens) {
      auto a = client_error(400, "max_tokens_exceeded",
                            std::string(protocol::kOutputLimitKeys[i]) + " " +
                                std::to_string(limits[i].max) +
                                " is above the tenant's ceiling of " + std::to_string(ceiling));
      a.reason = "max-tokens-exceeded";
      answer(a);
      return false;
    }
  }
  if (!rewrite) return true;
  // Each key present or null, and the route's default when none is present.
  std::array<protocol::Member, protocol::kOutputLimitKeys.size() + 1> put;
  std::size_t n = 0;
  for (std::size_t i = 0; i < limits.size(); ++i)
    if (limits[i].present || limits[i].has_null)
      put[n++] = {protocol::kOutputLimitKeys[i],
                  limits[i].present ? std::min(limits[i].max, ceiling) : ceiling};
  if (!req.max_tokens)
    put[n++] = {route_ == protocol::Route::kResponses ? "max_output_tokens" : "max_tokens",
                ceiling};
  // Each once: a key that was null and is written as the route's default.
  std::sort(put.begin(), put.begin() + static_cast<std::ptrdiff_t>(n),
            [](const auto& a, const auto& b) { return a.key < b.key; });
  n = static_cast<std::size_t>(
      std::unique(put.begin(), put.begin() + static_cast<std::ptrdiff_t>(n),
                  [](const auto& a, const auto& b) { return a.key == b.key; }) -
      put.begin());
  request_.body = protocol::body_with_members(request_.body, protocol::kOutputLimitKeys,
                                              std::span(put.data(), n));
  req.max_tokens = req.max_tokens ? std::min(*req.max_tokens, ceiling) : ceiling;
  return true;
}

// The tenant's requests in flight, at most its maxConcurrency: 429.
bool Exchange::take_tenant_permit(const auth::TenantPolicy& p) {
  if (p.max_concurrency == 0) return true;
  tenant_permit_ = ctx_.tenant_load.try_acquire(identity_.tenant, p.max_concurrency);
  if (tenant_permit_) return true;
  auto a =
      client_error(429, "tenant_concurrency_limit",
                   "tenant '" + identity_.tenant + "' has " + std::to_string(p.max_concurrency) +
                       " requests in flight already, its limit; retry when one ends");
  a.reason = "tenant-concurrency-limit";
  a.retry_after_seconds = 1;
  answer(a);
  return false;
}

bool Exchange::restricted_to_models() const {
  return has_tenant_policy() && identity_.policy && identity_.policy->restricts_models();
}

void Exchange::answer_models() {
  const auto catalog = ctx_.models.load();
  std::string body = R"({"object":"list","data":[)";
  bool first = true;
  if (catalog)
    for (const auto& m : catalog->models) {
      if (!auth::Tenants::model_allowed(*identity_.policy, m.id)) continue;
      if (!first) body += ',';
      body += m.entry;
      first = false;
    }
  body += "]}";
  flowcontrol::ErrorAnswer a;
  a.status = 200;
  a.code = "served";
  a.body = std::move(body);
  answer(a);
}

}  // namespace sluice::proxy

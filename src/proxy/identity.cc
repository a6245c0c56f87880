// Who the request is, and what its tenant may do: the I/O around
// admission's identity step (admission/identity.h), and the tenant policy
// step (auth/tenants.h). The head is enough to authenticate, so a request
// without valid credentials is refused before its body is read (and before
// the body budget holds it).
#include "admission/identity.h"

#include <algorithm>
#include <chrono>
#include <string_view>

#include "protocol/engine_priority.h"
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

}  // namespace

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

// admission::identify decides; here what it needs of the connection and
// the clock (asked only where it matters, as before), and what it asks for:
// the count of the credentials' result, a new JWKS, the answer.
bool Exchange::check_identity() {
  const auth::Authenticator& a = thread_.authenticator();
  admission::IdentityContext c(a);
  c.peer_trusted = !a.headers_trusted_by_default() && peer_trusted();
  c.now_unix = a.enabled() && !c.peer_trusted ? unix_now() : 0;
  c.token_cache = thread_.token_cache();
  c.client_certificate_name = conn_.client_certificate_name();
  c.body_read = !request_parser_ || request_parser_->is_done();
  c.agent_session_headers = thread_.policy().agent_session_headers;
  c.max_fairness_id_bytes = ctx_.config.server.max_fairness_id_bytes;
  admission::Request r(request_, identity_, route_);
  const admission::IdentityOutcome out = admission::identify(c, r);
  if (!out.auth_result.empty()) thread_.stats().auth_result(out.auth_result);
  if (out.jwks_refetch) ctx_.want_jwks_refetch();
  if (out.verdict.admitted()) return true;
  answer(out.verdict.answer());
  return false;
}

bool Exchange::authenticated() const { return admission::authenticated(identity_); }

bool Exchange::has_tenant_policy() const { return admission::under_tenant_policy(identity_); }

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

// Who the request is, and what its tenant may do: the I/O around
// admission's identity and tenant steps (admission/identity.h,
// admission/tenant_policy.h). The head is enough to authenticate, so a
// request without valid credentials is refused before its body is read (and
// before the body budget holds it).
#include "admission/identity.h"

#include <chrono>
#include <string_view>

#include "admission/tenant_policy.h"
#include "proxy/client_connection.h"
#include "proxy/exchange.h"

namespace sluice::proxy {

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
  return go_on(out.verdict);
}

bool Exchange::authenticated() const { return admission::authenticated(identity_); }

bool Exchange::has_tenant_policy() const { return admission::under_tenant_policy(identity_); }

// admission's tenant step: the policy decides (a refusal answered here),
// the tenant's concurrency permit is taken here (TenantLoad is shared by
// the I/O threads), then the request takes its objective and flow.
bool Exchange::check_tenant_policy(protocol::OpenAIRequest& req) {
  admission::Request r(request_, identity_, route_, &req);
  admission::TenantDecision d;
  if (const auto v = admission::check_tenant_policy(thread_.authenticator().tenants(), r, d);
      !v.admitted()) {
    answer(v.answer());
    return false;
  }
  if (d.max_concurrency > 0) {
    tenant_permit_ = ctx_.tenant_load.try_acquire(identity_.tenant, d.max_concurrency);
    if (!tenant_permit_) {
      answer(admission::tenant_concurrency_refused(identity_.tenant, d.max_concurrency));
      return false;
    }
  }
  admission::settle_tenant_flow(r, d);
  return true;
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

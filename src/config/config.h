// The typed configuration of sluice: a GIE EndpointPickerConfig plus the
// optional sluice sections `server`, `endpoints`, `objectives` and `flows`
// (DESIGN.md §3.3, §3.6). Every default is visible here.
//
// Loading throws ConfigError (config is read at startup or on reload, never on
// the data plane); the message names the file, line and field path.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::config {

using std::chrono::nanoseconds;
using namespace std::chrono_literals;

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// server.tls: a TLS listener for clients, beside the plain one (or instead
// of it: server.listen ""). The files are read at startup (an error names
// the file), again when one of them changes (checked every
// reloadCheckInterval) and on every reload; a set that does not load keeps
// the running one serving. TLS 1.0 and 1.1 are never offered.
struct TlsOptions {
  std::string listen;               // "": no TLS listener (no tls: section)
  std::string certificate_file;     // PEM: the server certificate, then its chain
  std::string key_file;             // PEM: its private key
  std::string min_version = "1.2";  // "1.2" | "1.3"
  std::string ciphers;              // OpenSSL cipher list for TLS 1.2; "": OpenSSL's defaults
  std::string cipher_suites;        // TLS 1.3 suites; "": OpenSSL's defaults
  // Set: client certificates are requested and verified against these CAs
  // (PEM); a client without one is still served unless required.
  std::string client_ca_file;
  bool require_client_certificate = false;
  nanoseconds reload_check_interval = 5s;
  bool enabled() const { return !listen.empty(); }
  bool operator==(const TlsOptions&) const = default;
};

// TLS towards a model server (server.upstreamTls, endpoints[].tls): the
// server's certificate verified against caFile (or the system's default
// paths) and its name (serverName, default the endpoint's host: SNI and
// hostname or IP check), unless insecureSkipVerify; an optional client
// certificate. The files are read at startup and on every reload.
struct UpstreamTlsOptions {
  bool enabled = false;
  std::string ca_file;
  std::string server_name;
  std::string certificate_file;
  std::string key_file;
  bool insecure_skip_verify = false;
  bool operator==(const UpstreamTlsOptions&) const = default;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:8080";  // "": none (only with tls)
  TlsOptions tls;
  std::string admin_listen = "127.0.0.1:9090";
  int threads = 0;  // 0: one I/O thread per core
  // Where the dispatcher runs: "thread" (its own), "inline" (on the first
  // I/O thread's event loop), "auto" (inline with one I/O thread).
  std::string dispatcher = "auto";
  std::uint64_t max_body_bytes = 8ull << 20;
  // Request-body bytes held at once, all connections (proxy/body_budget.h);
  // 0: a quarter of the memory sluice may use, at least maxBodyBytes.
  std::uint64_t max_buffered_body_bytes = 0;
  std::uint32_t max_header_bytes = 16u << 10;
  // An SSE stream's part of an event is held back until its blank line
  // comes (a client can use only whole events, and an early end then sends
  // an error event that parses); an event longer than this goes out as it
  // comes, and a stream that ends inside it ends without the error event.
  std::uint32_t sse_event_hold_bytes = 64u << 10;
  // Longest fairness id / objective name accepted (x-gateway-inference-*);
  // longer, or with bytes outside protocol/steering.h's set: 400.
  std::uint32_t max_fairness_id_bytes = 128;
  // Longest `model` accepted (it becomes a metric label and a log field);
  // longer, or with control characters: 400 invalid-model.
  std::uint32_t max_model_bytes = 256;
  // Client connections open at once, data plane and admin plane; past it a
  // new connection gets 503 too-many-connections and is closed.
  std::uint64_t max_connections = 10000;
  std::uint64_t admin_max_connections = 64;
  nanoseconds header_read_timeout = 10s;      // first byte to end of headers
  nanoseconds body_read_timeout = 30s;        // end of headers to end of body
  nanoseconds keep_alive_idle_timeout = 60s;  // between requests on a connection
  nanoseconds client_write_timeout = 30s;     // each write to a (slow) client
  nanoseconds upstream_connect_timeout = 2s;
  // Upstream silence allowed before the response headers and between body
  // chunks. An LLM may think for a while before the first token.
  nanoseconds upstream_idle_timeout = 120s;
  // Idle keep-alive connections kept per endpoint per I/O thread; more are closed.
  std::uint32_t upstream_max_idle_per_endpoint = 128;
  // The model servers' bearer token (server.upstreamCredentialFile), read
  // at load (startup and every reload); "" without one. Never logged nor
  // shown: only the file's name appears in messages.
  std::string upstream_credential_file;
  std::string upstream_credential;
  UpstreamTlsOptions upstream_tls;  // the pool's; an endpoint's tls: overrides
  // A pooled connection idle this long is closed (checked every second),
  // and so is every idle one of an endpoint that left the pool.
  nanoseconds upstream_pool_idle_timeout = 60s;
  // An endpoint that refused or timed out a connection is skipped this long,
  // at once (kept as it was; the ejection below comes on top of it).
  nanoseconds endpoint_down_backoff = 1s;
  // Passive health (Envoy's outlier detection): this many failures in a row
  // (connect refused or timed out, reset or EOF before any response byte, a
  // malformed response head; not an HTTP 5xx, not a client leaving) eject
  // an endpoint for base x 2^k (k: ejections since its last success), at
  // most the max; one success clears the streak. 0 turns ejection off. The
  // last usable endpoint is never ejected.
  std::uint32_t endpoint_ejection_consecutive_failures = 3;
  nanoseconds endpoint_ejection_base_time = 1s;
  nanoseconds endpoint_ejection_max_time = 30s;
  // On SIGTERM: how long in-flight requests may take before connections close.
  nanoseconds shutdown_grace_period = 30s;
  // On SIGTERM (and drain): how long queued requests may still wait for
  // dispatch; those left then end EvictedOther (503 evicted-other). Counted
  // from the signal, within the grace period.
  nanoseconds shutdown_queue_deadline = 10s;
  // One line per finished request ("" off; "-" standard error, else a file
  // opened for append), as text or JSON lines.
  std::string access_log;
  std::string access_log_format = "json";  // json | text
  std::string log_level = "info";          // debug | info | warn | error
  // Data layer: each endpoint's /metrics is scraped this often (GIE's
  // --refresh-metrics-interval), each scrape bounded by the timeout.
  nanoseconds metrics_refresh_interval = std::chrono::milliseconds(50);
  nanoseconds metrics_timeout = 1s;
  // A YAML file with an `endpoints:` list, watched: endpoints added to it
  // join the pool, removed ones leave it (requests in flight finish).
  // Empty: none. Checked for changes this often.
  std::string endpoints_file;
  nanoseconds endpoints_file_poll_interval = 1s;
  // DNS discovery (endpoints: - dns: NAME:PORT): every name looked up again
  // this often, each query bounded by the timeout, asked of these servers
  // ("IPv4:PORT"; empty: the system's resolv.conf).
  nanoseconds dns_refresh_interval = 5s;
  nanoseconds dns_timeout = 2s;
  std::vector<std::string> dns_servers;
  // With an admin token set, GET /metrics needs it too unless this is true
  // (a scraper without credentials); /healthz and /readyz are always open.
  bool admin_open_metrics = false;
  // Flows labelled one by one in /metrics; the rest are summed as `other`.
  std::uint32_t metrics_max_flows = 100;
  bool operator==(const ServerOptions&) const = default;
};

struct EndpointConfig {
  std::string address;  // host:port
  // DNS discovery: "NAME:PORT" whose A/AAAA records are the endpoints (each
  // an endpoint with this entry's engine, labels and policy); address is
  // then empty. Only in the config (Config::dns_endpoints).
  std::string dns;
  std::string host;
  std::uint16_t port = 0;
  std::string engine = "vllm";  // vllm | sglang | trtllm-serve
  // The engine's own scheduler: fcfs, or priority (vLLM
  // --scheduling-policy priority): then sluice writes the band's priority
  // into each request's "priority" field (replacing the client's).
  bool priority_scheduling = false;
  std::map<std::string, std::string> labels;
  // Its own bearer token (credentialFile), over server.upstreamCredentialFile;
  // read at load. Only in the config, not the endpoints file. Not part of
  // what the endpoint is (operator==): the request policy carries it.
  std::string credential_file;
  std::string credential;
  std::optional<UpstreamTlsOptions> tls;  // over server.upstreamTls
  // The line of its entry in the file it came from (for messages); not part
  // of what the endpoint is, so moving the entry changes nothing on reload.
  int line = 0;
  bool operator==(const EndpointConfig& o) const {
    return address == o.address && dns == o.dns && host == o.host && port == o.port &&
           engine == o.engine && priority_scheduling == o.priority_scheduling &&
           labels == o.labels && tls == o.tls;
  }
};

struct ObjectiveConfig {
  std::string name;
  int priority = 0;
  std::optional<nanoseconds> ttl;
  bool operator==(const ObjectiveConfig&) const = default;
};

// A flow's weight, in the config and through the admin API: a tiny one (a
// subnormal such as 1e-320) makes a VTC cost per token overflow to
// infinity, so weights are bounded on both sides.
inline constexpr double kMinFlowWeight = 1e-6;
inline constexpr double kMaxFlowWeight = 1e6;

struct FlowConfig {
  std::string id;
  double weight = 1.0;
  bool operator==(const FlowConfig&) const = default;
};

// A plugin instance of the GIE `plugins:` list. Parameters are interpreted by
// the plugin's factory (scheduling layer), which reports its own errors.
struct PluginSpec {
  std::string type;
  std::string name;  // defaults to type
  YAML::Node parameters;
  int line = 0;
};

struct ProfilePluginRef {
  std::string plugin_ref;
  std::optional<double> weight;
  int line = 0;
};

struct SchedulingProfileSpec {
  std::string name;
  std::vector<ProfilePluginRef> plugins;
};

// flowControl.priorityBands[] (and defaultPriorityBand). Refs are resolved
// to policy types here; parameters are in the resolved plugin's spec.
inline constexpr std::uint64_t kDefaultBandMaxRequests = 5000;

struct BandSpec {
  int priority = 0;
  std::uint64_t max_bytes = 1000000000;  // GIE's default band byte bound
  // llm-d's default: a band is always bounded (0 in the file is this too).
  std::uint64_t max_requests = kDefaultBandMaxRequests;
  std::string fairness_ref = "global-strict-fairness-policy";
  std::string ordering_ref = "fcfs-ordering-policy";
  std::string fairness_type = "global-strict-fairness-policy";
  std::string ordering_type = "fcfs-ordering-policy";
  double anti_starvation_share = 0;  // sluice: guaranteed fraction of dispatches
  // defaultRequestTTL of this band (llm-d): replaces flowControl's while the
  // pool has endpoints; 0s (none) is no TTL in this band. Unset: the global.
  bool ttl_set = false;
  std::optional<nanoseconds> ttl;
  bool operator==(const BandSpec&) const = default;
};

// program-aware-fairness's parameters (llm-d's names; seconds as llm-d's).
struct ProgramAwareSpec {
  double weight_service = 0.8;          // lasWeightService
  double weight_head_wait = 0.2;        // lasWeightHeadWait
  double half_life_seconds = 60;        // lasHalfLifeSeconds; 0: no decay
  double eviction_ttl_seconds = 3600;   // evictionTtlSeconds; 0: no eviction
  double eviction_sweep_seconds = 300;  // evictionSweepSeconds
  std::uint32_t max_programs = 10000;   // maxPrograms (sluice)
  bool operator==(const ProgramAwareSpec&) const = default;
};

// A usage-limit policy (flowControl.usageLimitPolicyPluginRef): one
// dispatch ceiling per band from the pool's saturation.
struct UsageLimitSpec {
  std::string type;  // empty: none (no ceiling beyond the detector's)
  std::string name;
  // static-usage-limit-policy
  double threshold = 1.0;
  // priority-holdback-policy
  double min_ceiling = 0;
  double max_ceiling = 1.0;
  bool value_domain = false;     // domain: rank (default) | value | explicit
  bool explicit_domain = false;  // domain: explicit
  // Explicit domain: ceiling by band priority, highest first, non-increasing.
  // A band not listed takes the ceiling of the nearest listed band above it
  // (1.0 above all of them); llm-d gives it 0.0, which never dispatches it.
  std::vector<std::pair<int, double>> ceilings;
  bool operator==(const UsageLimitSpec&) const = default;
};

// flowControl.headroom (sluice): room kept for bands at or above
// `protected_priority` on every endpoint (or across the pool), lent to lower
// bands while none of theirs waits; the top band may go past the detector.
struct HeadroomSpec {
  bool enabled = false;
  int protected_priority = 0;
  std::uint64_t reserve = 0;         // requests
  std::uint64_t reserve_tokens = 0;  // input + max output tokens
  // Whole endpoints (the pool's last ones) kept free of lower bands: the
  // protected request finds an engine with nothing of theirs running.
  std::uint64_t reserve_endpoints = 0;
  bool pool_scope = false;  // scope: endpoint (default) | pool
  bool lend = true;
  // Lent only once no protected request has arrived for this long.
  nanoseconds lend_after_idle = std::chrono::seconds(1);
  std::uint64_t over_admission = 0;  // requests per endpoint, top band only
  bool operator==(const HeadroomSpec&) const = default;
};

// flowControl.enableEviction (llm-d) and flowControl.eviction (sluice).
struct EvictionSpec {
  bool enabled = false;
  std::vector<int> priorities;  // empty: every band below 0
  nanoseconds wait_budget{};
  std::optional<nanoseconds> grace;  // default by detector (llm-d's rule)
  nanoseconds confirmation_timeout = std::chrono::seconds(10);
  bool operator==(const EvictionSpec&) const = default;
};

struct FlowControlSpec {
  bool enabled = false;            // featureGates: [flowControl]
  std::uint64_t max_bytes = 0;     // global; 0: unlimited
  std::uint64_t max_requests = 0;  // global; 0: unlimited
  // sluice: 60 s unless set (GIE has none), so no request waits for as long
  // as its client is patient; `defaultRequestTTL: 0` turns it off (GIE's 0).
  std::optional<nanoseconds> default_request_ttl = std::chrono::seconds(60);
  // llm-d's noEndpointRequestTTL: the TTL while the pool has no endpoint.
  // Unset: defaultRequestTTL applies; 0: no expiry while the pool is empty.
  bool no_endpoint_ttl_set = false;
  std::optional<nanoseconds> no_endpoint_request_ttl;
  // sluice: live flows (fairness id x priority) at most; a new id past it
  // replaces the longest-idle flow or is refused 429 rejected-capacity.
  std::uint64_t max_flows = 10000;
  BandSpec default_band;
  std::optional<BandSpec> default_negative_band;  // llm-d: template for priorities < 0
  std::vector<BandSpec> bands;
  // sluice additions
  bool displacement = true;  // displacementPolicy: lowest-band-newest-first | none
  nanoseconds flow_idle_timeout = std::chrono::minutes(5);
  double vtc_input_price = 1.0;  // from the vtc-fairness-policy plugin's parameters
  double vtc_output_price = 2.0;
  ProgramAwareSpec program_aware;  // from the program-aware-fairness plugin's parameters
  UsageLimitSpec usage_limit;
  HeadroomSpec headroom;
  EvictionSpec eviction;
  bool operator==(const FlowControlSpec&) const = default;
};

struct SaturationDetectorSpec {
  std::string type = "utilization-detector";
  // utilization-detector
  double queue_depth_threshold = 5;
  double kv_cache_util_threshold = 0.8;
  nanoseconds metrics_staleness_threshold = std::chrono::milliseconds(200);
  // concurrency-detector
  bool tokens_mode = false;
  std::uint64_t max_concurrency = 100;
  std::uint64_t max_token_concurrency = 1000000;
  // both
  double headroom = 0;
  bool operator==(const SaturationDetectorSpec&) const = default;
};

// The fleet's shared store (`redis:`): with it, replicas share per-flow
// charged service, per-endpoint in-flight work and per-band backlog through
// Redis, each from its own sync thread (src/fleet/fleet_sync.h).
struct RedisSpec {
  bool enabled = false;  // a `redis:` section is present
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string unix_socket;  // preferred over address when set
  std::string user;         // ACL user (AUTH user password)
  std::string password;     // read from passwordFile at load; never in the file itself
  std::string password_file;
  std::string key_prefix = "sluice";
  std::string replica_id;  // empty: hostname-pid
  nanoseconds sync_interval = std::chrono::milliseconds(25);
  nanoseconds timeout = std::chrono::milliseconds(200);  // connect and each call
  // A replica whose state was not refreshed for this long is gone: its
  // in-flight and backlog no longer count (and Redis expires its keys).
  // Each reader judges it on its own clock (the record's seq not moving),
  // so a key left without an expiry does not keep a replica alive.
  nanoseconds lease = std::chrono::seconds(2);
  // Fleet fairness: a flow whose VTC counter is ahead of the smallest one
  // backlogged on another replica (same band) by more than this waits, so
  // that replica's flow gets the room; never longer than maxHold while the
  // pool has room (then one request goes anyway).
  double fairness_slack = 2048;
  nanoseconds max_hold = std::chrono::milliseconds(100);
  std::uint32_t max_replicas = 64;  // others' state read at most; more are ignored
  bool operator==(const RedisSpec&) const = default;
};

// auth.apiKeys: the key records (auth/api_keys.h) from a file, watched.
struct ApiKeysSpec {
  std::string file;  // "" = no key file (keys may still come from the fleet)
  nanoseconds poll_interval = std::chrono::seconds(1);
  // Admin API key changes waiting for the key writer at most; past it 503.
  std::uint32_t max_pending_writes = 64;
  bool operator==(const ApiKeysSpec&) const = default;
};

// auth.jwt: bearer tokens signed by an identity provider whose keys are a
// JWKS (a file, or fetched from a URL in the background).
struct JwtSpec {
  bool enabled = false;  // a `jwt:` section is present
  std::string jwks_file;
  std::string jwks_url;      // http:// or https://
  std::string jwks_ca_file;  // https: verify the IdP against this PEM bundle ("" the system's)
  std::string issuer;        // required match when set
  std::vector<std::string> audiences;
  std::vector<std::string> algorithms{"RS256", "ES256", "EdDSA"};
  nanoseconds leeway = std::chrono::seconds(60);
  std::string tenant_claim = "sub";
  std::string objective_claim;  // "" = the token names no objective
  // A token's own scope within its tenant's policy (as a key's): claims
  // naming its models (an array, or a space-separated string) and its
  // max_tokens ceiling. "" = not read.
  std::string models_claim;
  std::string max_tokens_claim;
  std::uint32_t max_token_bytes = 8192;
  std::uint32_t cache_entries = 4096;  // verified tokens kept, per I/O thread
  nanoseconds jwks_refresh_interval = std::chrono::minutes(5);
  // An unknown `kid` fetches the JWKS again, at most this often.
  nanoseconds jwks_min_refetch_interval = std::chrono::seconds(30);
  bool operator==(const JwtSpec&) const = default;
};

// auth: who a request is. Without it (and without trustedProxies), a
// client's steering headers are taken as they are (GIE's behaviour).
struct AuthSpec {
  bool enabled = false;  // an `auth:` section with apiKeys or jwt
  ApiKeysSpec api_keys;
  JwtSpec jwt;
  // Peers whose steering headers are taken as they are, unauthenticated
  // (a gateway in front that authenticated them): CIDRs or addresses.
  std::vector<std::string> trusted_proxies;
  // A verified client certificate's name (server.tls.clientCaFile) is the
  // tenant when the request brings no key or token.
  bool client_certificate_tenants = false;
  // The realm named in WWW-Authenticate on a 401.
  std::string realm = "sluice";
  bool operator==(const AuthSpec&) const = default;
};

// Quotas (issue 41): how much a tenant or key may use over a window. The
// configuration only, so far: nothing enforces these yet.
enum class QuotaMeasure : std::uint8_t { kRequests, kInputTokens, kOutputTokens, kTokens, kCost };
enum class QuotaCalendar : std::uint8_t { kNone, kDay, kMonth };  // UTC

// One limit: tenants[].quotas[], or a key's own (auth/api_keys.h).
struct QuotaLimitSpec {
  std::string name;  // unique within its tenant (or key)
  QuotaMeasure measure = QuotaMeasure::kTokens;
  // Requests or tokens; kCost: micro-units of the prices' currency (1e-6).
  std::uint64_t amount = 0;
  std::chrono::nanoseconds window{0};  // sliding window, 1s..31d; 0 when calendar != kNone
  QuotaCalendar calendar = QuotaCalendar::kNone;
  bool shadow = false;              // mode: enforce (default) | shadow
  bool queue = false;               // onExceeded: refuse (default) | queue
  std::vector<std::string> models;  // exact or "prefix*"; empty: every model
  int line = 0;
  bool operator==(const QuotaLimitSpec& o) const {  // all but line
    return name == o.name && measure == o.measure && amount == o.amount && window == o.window &&
           calendar == o.calendar && shadow == o.shadow && queue == o.queue && models == o.models;
  }
};

// quota.prices[]: what a million tokens of a model cost, in micro-units.
struct ModelPrice {
  std::string model;  // exact, "prefix*" or "*"
  std::uint64_t input_per_million = 0;
  std::uint64_t output_per_million = 0;
  int line = 0;
  bool operator==(const ModelPrice& o) const {  // all but line
    return model == o.model && input_per_million == o.input_per_million &&
           output_per_million == o.output_per_million;
  }
};

enum class QuotaFailMode : std::uint8_t { kOpen, kClosed, kLocal };
enum class QuotaHeaders : std::uint8_t { kAlways, kRefused, kNever };

// quota: what every limit shares.
struct QuotaSpec {
  std::vector<ModelPrice> prices;
  // Redis unreachable: each replica its share of the limit.
  QuotaFailMode fail_mode = QuotaFailMode::kLocal;
  QuotaHeaders headers = QuotaHeaders::kAlways;  // as OpenAI: on every answer
  // Reserved when neither the body nor the tenant's maxTokens says.
  std::uint64_t default_output_tokens = 4096;
  // Tenants the "*" entry covers whose books are kept at once (each made at
  // its first request; an idle one is forgotten to make room; none idle:
  // 503 quota_capacity). Listed tenants and keys are not counted.
  std::uint64_t max_counted_tenants = 100000;
  bool operator==(const QuotaSpec&) const = default;
};

// Limits per tenant or key, and models per limit, at most.
// 16: a request is charged to its tenant's and its key's at once, and the
// ledger holds at most 32 limits a request (quota::Ledger::kMaxLimitsPerOwner).
inline constexpr std::size_t kMaxQuotaLimits = 16;
inline constexpr std::size_t kMaxQuotaModels = 64;

// tenants[]: what an authenticated tenant may do. `id: "*"` is the policy
// of every tenant not listed; without it such a tenant may do anything.
struct TenantSpec {
  std::string id;
  // Objectives the tenant may name (empty: any), and the highest it may
  // reach by priority (empty: no ceiling).
  std::vector<std::string> objectives;
  std::string max_objective;
  bool refuse_above_max_objective = false;  // aboveMaxObjective: clamp | refuse
  std::string default_objective;            // when the request names none
  // Models: an entry ending in '*' is a prefix; empty: any model.
  std::vector<std::string> models;
  std::uint64_t max_tokens = 0;          // 0: no ceiling
  bool refuse_above_max_tokens = false;  // aboveMaxTokens: clamp | refuse
  std::uint32_t max_concurrency = 0;     // requests in flight at once; 0: no limit
  std::optional<double> weight;          // the tenant's flow weight
  // Sub-flow names the tenant may choose with the fairness-id header (its
  // flow is then "<tenant>/<name>"); "*" any. Empty: none.
  std::vector<std::string> subflows;
  // Verified client-certificate names that are this tenant
  // (auth.clientCertificateTenants): an exact name, or a URI ending in "/*"
  // (any one last path segment: "spiffe://td/ns/prod/sa/*").
  std::vector<std::string> certificate_names;
  std::vector<QuotaLimitSpec> quotas;  // nothing enforces them yet (issue 41)
  int line = 0;
  bool operator==(const TenantSpec& o) const {
    return id == o.id && objectives == o.objectives && max_objective == o.max_objective &&
           refuse_above_max_objective == o.refuse_above_max_objective &&
           default_objective == o.default_objective && models == o.models &&
           max_tokens == o.max_tokens && refuse_above_max_tokens == o.refuse_above_max_tokens &&
           max_concurrency == o.max_concurrency && weight == o.weight && subflows == o.subflows &&
           certificate_names == o.certificate_names && quotas == o.quotas;
  }
};

// The model servers' credentials as requests use them: the Authorization
// value ("Bearer <token>") for each endpoint address with its own, and the
// pool's for the rest ("" : none).
struct UpstreamCredentials {
  std::string pool;
  std::map<std::string, std::string> by_address;
  const std::string& for_address(const std::string& address) const {
    auto it = by_address.find(address);
    return it == by_address.end() ? pool : it->second;
  }
  bool any() const { return !pool.empty() || !by_address.empty(); }
};

// requestHandler: (llm-d): which requests sluice parses. openai-parser
// parses the OpenAI paths (what sluice does without the section);
// passthrough-parser forwards, without reading the body, what no parser
// before it claims: every request when it is the only one.
struct RequestHandlerSpec {
  bool openai = true;                // the OpenAI paths are parsed
  bool passthrough = false;          // other paths are forwarded unparsed
  bool propagate_priority = false;   // the band's priority in every body (vLLM's `priority`)
  std::vector<std::string> parsers;  // the plugin names, in order
};

struct Config {
  std::string source;  // file name, for messages
  std::string api_version;
  std::string kind;

  ServerOptions server;
  std::vector<EndpointConfig> endpoints;
  std::vector<EndpointConfig> dns_endpoints;  // `- dns: NAME:PORT` entries
  std::vector<ObjectiveConfig> objectives;
  std::vector<FlowConfig> flows;

  // GIE EndpointPickerConfig sections.
  std::vector<PluginSpec> plugins;
  std::vector<SchedulingProfileSpec> scheduling_profiles;
  std::vector<std::string> feature_gates;
  // The plugins, profiles, parser and data-layer sections as parsed YAML
  // text: equal text, equal scheduler (a reload keeps the running one).
  std::string scheduling_fingerprint;
  FlowControlSpec flow_control;
  // The agent-identity plugin: the session headers whose first non-empty
  // value names the flow of a request that names none (lower case, in
  // order: additionalSessionHeaders, then llm-d's defaults). Empty: no
  // agent-identity plugin declared.
  std::vector<std::string> agent_session_headers;
  SaturationDetectorSpec saturation_detector;
  RedisSpec redis;
  AuthSpec auth;
  std::vector<TenantSpec> tenants;
  QuotaSpec quota;
  // Every detector declared under plugins:, by instance name (a profile may
  // use one as a filter).
  std::map<std::string, SaturationDetectorSpec> detectors;
  // Sections that later layers interpret (parser, data layer); kept as
  // parsed YAML with their line marks.
  YAML::Node parser;
  YAML::Node data;
  YAML::Node data_layer;
  RequestHandlerSpec request_handler;
};

// Every plugin `type` sluice knows (flow control, scheduling, data layer,
// parser). Another type under plugins: is an error naming its line.
bool is_known_plugin_type(const std::string& type);
std::string known_plugin_types();  // for messages

// The most a config or endpoints file may hold. Both are read whole into
// memory before parsing; a larger file, or one that never ends (/dev/zero),
// is refused after reading one byte more than this.
inline constexpr std::size_t kMaxFileBytes = 4u << 20;
// A PEM file (a CA bundle, a certificate chain, a key) at most: larger is
// not one, and is refused like a larger config file.
inline constexpr std::size_t kMaxPemFileBytes = 1u << 20;
// Endpoints in a config or endpoints file at most (the data layer's slots).
inline constexpr std::size_t kMaxEndpoints = 4096;

// Any file that can be read (a FIFO or /dev/stdin too, given 5 s to end).
// A mapping with a repeated key anywhere in it is an error, as in
// load_config_string.
Config load_config_file(const std::string& path);
// An endpoints file: `endpoints:` as in the config, nothing else. It must be
// a regular file: it is read again on the data layer's thread at every
// change, which must not wait on a pipe or a device.
std::vector<EndpointConfig> load_endpoints_file(const std::string& path);
// A regular file's text, at most `max_bytes` (the key file; the upstream
// TLS files, kMaxPemFileBytes); throws ConfigError naming the file.
std::string read_regular_file(const std::string& path, std::size_t max_bytes = kMaxFileBytes);
Config load_config_string(const std::string& text, const std::string& source = "<config>");
// What c's credential files held, as requests send it.
UpstreamCredentials upstream_credentials(const Config& c);
// A credential file's token: its text less trailing whitespace, 1..4096
// printable ASCII bytes without spaces; throws ConfigError naming the file
// (never quoting it).
std::string read_credential_file(const std::string& path);

}  // namespace sluice::config

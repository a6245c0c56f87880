// sluice-ctl: the operator's command-line client for sluice's admin plane.
// Tables for people, --json for scripts. Exit codes (ctl_answers.h): 0 done,
// 1 the server refused (its message is printed), 2 usage, 3 the admin plane
// is unreachable, 4 its answer is not what sluice-ctl can read.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tools/ctl/ctl_answers.h"

namespace {

namespace ctl = sluice::ctl;

using json = nlohmann::json;

constexpr const char* kUsage =
    R"(usage: sluice-ctl [--admin HOST:PORT] [--token-file FILE] [--json] COMMAND

commands:
  flows                                 every flow: priority, band, weight, queue, outcomes
  flow ID                               one flow id: its override and its flows
  flow set ID [--weight W] [--priority P] [--max-queued N]
                                        override a flow (N 0: no limit)
  flow reset ID                         remove the overrides
  bands                                 every band: limits, policies, queue
  band set PRIORITY [--max-requests N] [--max-bytes N] [--fairness POLICY]
                    [--ordering POLICY] [--share S]
                                        add or change a band
  band delete PRIORITY                  revert a band to the default
  endpoints                             the pool: health, metrics and their age, in flight
  reload                                re-read the config file
  drain [--wait] [--timeout SECONDS]    stop admitting; --wait: until drained
  drain status | drain cancel           where a drain stands; admit again
  keys                                  every API key: id, tenant, prefix, expiry, state
  key ID                                one key's record (never the key itself)
  key create --tenant T [--id ID] [--expires RFC3339|UNIX]
             [--models M,P*] [--max-objective O] [--max-tokens N]
             [--quota SPEC]...          a new key, printed once, alone on stdout;
                                        its scope narrows its tenant's policy
                                        SPEC: MEASURE=AMOUNT/PERIOD[,name=N][,shadow]
                                        [,models=M|P*], e.g. tokens=20k/1m,
                                        requests=100/1s, cost=5/month (PERIOD: day,
                                        month or a duration; MEASURE: requests,
                                        inputTokens, outputTokens, tokens, cost)
  key disable ID | key enable ID        refuse the key; accept it again
  key revoke ID                         delete the key
  quotas [--tenant ID]                  each quota limit: used, reserved, remaining, reset
  quota reset TENANT                    the tenant's windows count nothing from now
  metrics                               the Prometheus exposition

The admin address defaults to $SLUICE_ADMIN or 127.0.0.1:9090; the token to
--token-file or $SLUICE_ADMIN_TOKEN.
)";

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "sluice-ctl: " << what << "\n" << kUsage;
  std::exit(ctl::kExitUsage);
}

// Admin answers are a few hundred KiB at most (the flows list defaults to
// 1000 flows); a server that sends more than this is not the admin plane,
// and what it sends is not kept in memory.
constexpr std::size_t kMaxAnswerBytes = std::size_t{64} << 20;

struct Reply {
  int status = 0;
  std::string body;
};

struct Client {
  std::string host = "127.0.0.1";
  std::string port = "9090";
  std::string token;

  // One request over a fresh connection (Connection: close); exits 3 if
  // the admin plane cannot be reached or does not answer.
  Reply call(const std::string& method, const std::string& path,
             const std::string& body = "") const {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
      unreachable(std::string("cannot resolve: ") + gai_strerror(rc));
    int fd = -1;
    std::string error = "no address";
    for (addrinfo* a = res; a; a = a->ai_next) {
      fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      timeval tv{10, 0};  // each send/receive; a stuck server does not hang the CLI
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) unreachable(error);
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: " + host + ":" + port +
                      "\r\nConnection: close\r\nUser-Agent: sluice-ctl\r\n";
    if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
    if (!body.empty()) req += "Content-Type: application/json\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    for (std::size_t sent = 0; sent < req.size();) {
      ssize_t n = send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        close(fd);
        unreachable(std::string("send failed: ") + std::strerror(errno));
      }
      sent += static_cast<std::size_t>(n);
    }
    std::string raw;
    char buf[16384];
    while (true) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n < 0) {
        close(fd);
        unreachable(std::string("no answer: ") + std::strerror(errno));
      }
      if (n == 0) break;
      raw.append(buf, static_cast<std::size_t>(n));
      if (raw.size() > kMaxAnswerBytes) {
        // Far beyond any admin answer: not something to hold in memory.
        close(fd);
        std::cerr << "sluice-ctl: the answer from " << host << ":" << port
                  << " is larger than 64 MiB\n";
        std::exit(ctl::kExitUnreadable);
      }
    }
    close(fd);
    Reply r;
    const auto head_end = raw.find("\r\n\r\n");
    auto digit = [&](std::size_t i) { return raw.size() > i && raw[i] >= '0' && raw[i] <= '9'; };
    if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || head_end == std::string::npos || !digit(9) ||
        !digit(10) || !digit(11))
      unreachable("not an HTTP answer");
    r.status = (raw[9] - '0') * 100 + (raw[10] - '0') * 10 + (raw[11] - '0');
    r.body = raw.substr(head_end + 4);
    // The admin plane answers with Content-Length; chunked is not used.
    return r;
  }

  [[noreturn]] void unreachable(const std::string& why) const {
    std::cerr << "sluice-ctl: cannot reach the admin plane at " << host << ":" << port << ": "
              << why << "\n";
    std::exit(ctl::kExitUnreachable);
  }
};

// Parses "--name value" options after the positional arguments.
struct Options {
  std::vector<std::pair<std::string, std::string>> values;
  bool flag(const std::string& name) const {
    for (const auto& [k, v] : values)
      if (k == name) return true;
    return false;
  }
  std::optional<std::string> get(const std::string& name) const {
    for (const auto& [k, v] : values)
      if (k == name) return v;
    return std::nullopt;
  }
  // Every value of a repeatable option, in order.
  std::vector<std::string> all(const std::string& name) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : values)
      if (k == name) out.push_back(v);
    return out;
  }
};

Options parse_options(const std::vector<std::string>& args, std::size_t from,
                      std::initializer_list<const char*> valued,
                      std::initializer_list<const char*> flags = {}) {
  Options o;
  for (std::size_t i = from; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (std::find_if(flags.begin(), flags.end(), [&](const char* f) { return a == f; }) !=
        flags.end()) {
      o.values.emplace_back(a, "");
      continue;
    }
    if (std::find_if(valued.begin(), valued.end(), [&](const char* f) { return a == f; }) ==
        valued.end())
      usage_error("unexpected '" + a + "'");
    if (i + 1 >= args.size()) usage_error(a + " needs a value");
    o.values.emplace_back(a, args[++i]);
  }
  return o;
}

// A JSON number from an option, or a usage error.
json number_option(const std::string& name, const std::string& text, bool integer) {
  char* end = nullptr;
  errno = 0;
  if (integer) {
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno)
      usage_error(name + " must be a whole number, got '" + text + "'");
    return v;
  }
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno)
    usage_error(name + " must be a number, got '" + text + "'");
  return v;
}

// Writes an answer's outcome out; returns its exit code.
int emit(const ctl::Outcome& o) {
  std::cout << o.out << std::flush;
  std::cerr << o.err;
  return o.exit_code;
}

// One invocation: where the admin plane is, how to answer, and the command
// with its arguments (args[0]: the command).
struct Invocation {
  Client client;
  bool as_json = false;
  std::vector<std::string> args;

  const std::string& cmd() const { return args[0]; }
  // The i-th argument, or a usage error saying the command needs `what`.
  const std::string& arg(std::size_t i, const char* what) const {
    if (i >= args.size()) usage_error(cmd() + " needs " + what);
    return args[i];
  }
  // Reads the answer to one request and writes out what it says.
  int answer(ctl::Command command, const std::string& subject, const Reply& r) const {
    return emit(ctl::read_answer({command, subject, as_json}, r.status, r.body));
  }
  // A command without arguments: one request, its answer written out.
  int simple(ctl::Command command, const std::string& method, const std::string& path) const {
    parse_options(args, 1, {});
    return answer(command, "", client.call(method, path));
  }
};

// The admin address from $SLUICE_ADMIN (HOST:PORT), if it is set.
void admin_from_environment(Client& client) {
  if (const char* a = std::getenv("SLUICE_ADMIN"); a && *a) {
    std::string s = a;
    auto colon = s.rfind(':');
    if (colon == std::string::npos) usage_error("SLUICE_ADMIN must be HOST:PORT");
    client.host = s.substr(0, colon);
    client.port = s.substr(colon + 1);
  }
}

// --admin HOST:PORT (an IPv6 host in brackets).
void admin_from_option(Client& client, const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    usage_error("--admin must be HOST:PORT");
  client.host = s.substr(0, colon);
  client.port = s.substr(colon + 1);
  if (client.host.size() > 2 && client.host.front() == '[')
    client.host = client.host.substr(1, client.host.size() - 2);
}

// The global options into `inv` (and the token file's name), everything
// else into inv.args. False at --help, where parsing stops.
bool parse_arguments(int argc, char** argv, Invocation& inv, std::string& token_file) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--admin") {
      admin_from_option(inv.client, value());
    } else if (a == "--token-file") {
      token_file = value();
    } else if (a == "--json") {
      inv.as_json = true;
    } else if (a == "--help" || a == "-h") {
      return false;
    } else {
      inv.args.push_back(a);
    }
  }
  return true;
}

// The token: the first line of --token-file, else $SLUICE_ADMIN_TOKEN.
void read_token(Client& client, const std::string& token_file) {
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) usage_error("cannot read --token-file " + token_file);
    std::getline(in, client.token);
    while (!client.token.empty() && (client.token.back() == '\r' || client.token.back() == ' '))
      client.token.pop_back();
  } else if (const char* t = std::getenv("SLUICE_ADMIN_TOKEN"); t && *t) {
    client.token = t;
  }
}

// flow ID | flow set ID [--weight W] [--priority P] [--max-queued N] |
// flow reset ID
int run_flow(const Invocation& inv) {
  const auto& args = inv.args;
  const std::string& sub = inv.arg(1, "an ID, or set/reset ID");
  if (sub == "set") {
    const std::string& id = inv.arg(2, "a flow ID");
    auto o = parse_options(args, 3, {"--weight", "--priority", "--max-queued"});
    json body = json::object();
    if (auto v = o.get("--weight")) body["weight"] = number_option("--weight", *v, false);
    if (auto v = o.get("--priority")) body["priority"] = number_option("--priority", *v, true);
    if (auto v = o.get("--max-queued")) body["maxQueued"] = number_option("--max-queued", *v, true);
    if (body.empty()) usage_error("flow set needs --weight, --priority or --max-queued");
    return inv.answer(ctl::Command::kFlowSet, id,
                      inv.client.call("PUT", "/admin/v1/flows/" + id,
                                      body.dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  if (sub == "reset") {
    const std::string& id = inv.arg(2, "a flow ID");
    parse_options(args, 3, {});
    return inv.answer(ctl::Command::kFlowReset, id,
                      inv.client.call("DELETE", "/admin/v1/flows/" + id));
  }
  parse_options(args, 2, {});
  return inv.answer(ctl::Command::kFlow, sub, inv.client.call("GET", "/admin/v1/flows/" + sub));
}

// band set PRIORITY [--max-requests N] [--max-bytes N] [--fairness POLICY]
// [--ordering POLICY] [--share S] | band delete PRIORITY
int run_band(const Invocation& inv) {
  const auto& args = inv.args;
  const std::string& sub = inv.arg(1, "set or delete");
  const std::string& priority = inv.arg(2, "a PRIORITY");
  if (sub == "set") {
    auto o = parse_options(
        args, 3, {"--max-requests", "--max-bytes", "--fairness", "--ordering", "--share"});
    json body = json::object();
    if (auto v = o.get("--max-requests"))
      body["maxRequests"] = number_option("--max-requests", *v, true);
    if (auto v = o.get("--max-bytes")) body["maxBytes"] = number_option("--max-bytes", *v, true);
    if (auto v = o.get("--fairness")) body["fairnessPolicy"] = *v;
    if (auto v = o.get("--ordering")) body["orderingPolicy"] = *v;
    if (auto v = o.get("--share"))
      body["antiStarvationShare"] = number_option("--share", *v, false);
    return inv.answer(ctl::Command::kBandSet, priority,
                      inv.client.call("PUT", "/admin/v1/bands/" + priority,
                                      body.dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  if (sub == "delete") {
    parse_options(args, 3, {});
    return inv.answer(ctl::Command::kBandDelete, priority,
                      inv.client.call("DELETE", "/admin/v1/bands/" + priority));
  }
  usage_error("band takes set or delete");
}

// drain [--wait] [--timeout SECONDS] | drain status | drain cancel. With
// --wait, polls until drained (exit 1 past the timeout).
int run_drain(const Invocation& inv) {
  const auto& args = inv.args;
  const Client& client = inv.client;
  if (args.size() > 1 && (args[1] == "status" || args[1] == "cancel")) {
    parse_options(args, 2, {});
    if (args[1] == "status")
      return inv.answer(ctl::Command::kDrainStatus, "", client.call("GET", "/admin/v1/drain"));
    return inv.answer(ctl::Command::kDrainCancel, "", client.call("DELETE", "/admin/v1/drain"));
  }
  auto o = parse_options(args, 1, {"--timeout"}, {"--wait"});
  double timeout = 300;
  if (auto v = o.get("--timeout")) timeout = number_option("--timeout", *v, false).get<double>();
  auto read = [&](ctl::Command command, const Reply& r) {
    return ctl::read_drain({command, "", inv.as_json}, r.status, r.body);
  };
  auto d = read(ctl::Command::kDrain, client.call("POST", "/admin/v1/drain"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  while (d.outcome.exit_code == ctl::kExitDone && o.flag("--wait") && d.state != "drained") {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::cerr << "sluice-ctl: not drained after " << timeout << " s: " << d.counts << "\n";
      return ctl::kExitRefused;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling a remote state
    d = read(ctl::Command::kDrainWait, client.call("GET", "/admin/v1/drain"));
  }
  return emit(d.outcome);
}

// A key ID as sluice takes it (auth::is_valid_key_id: 1 to 64 of letters,
// digits, _ . -), or a usage error: it goes into the request's path.
const std::string& key_id(const Invocation& inv, std::size_t i) {
  const std::string& id = inv.arg(i, "a key ID");
  const bool valid =
      !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
      });
  if (!valid) usage_error("a key ID is 1 to 64 of letters, digits, _ . -, got '" + id + "'");
  return id;
}

// The parts of `text` between `sep`s (empty ones too).
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t end = text.find(sep, at);
    parts.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) return parts;
    at = end + 1;
  }
}

// `text` is digits with an optional fraction, then one of `suffixes` or
// none: the shape of a quota amount (the server checks its value).
bool amount_shaped(const std::string& text, std::initializer_list<const char*> suffixes) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i > from;
  };
  if (!digits()) return false;
  if (i < text.size() && text[i] == '.' && (++i, !digits())) return false;
  const std::string rest = text.substr(i);
  return rest.empty() ||
         std::any_of(suffixes.begin(), suffixes.end(), [&](const char* s) { return rest == s; });
}

// A Go duration's shape: numbers each with a unit, "1m", "1h30m", "1.5s".
bool duration_shaped(const std::string& text) {
  static constexpr const char* kUnits[] = {"ns", "us", "\u00b5s", "ms", "s", "m", "h"};
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t from = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    if (i == from) return false;
    bool unit = false;
    for (const char* u : kUnits) {  // "ms" before "m" and "s"
      const std::string_view uv = u;
      if (text.compare(i, uv.size(), uv) == 0) {
        i += uv.size();
        unit = true;
        break;
      }
    }
    if (!unit) return false;
  }
  return !text.empty();
}

// --quota MEASURE=AMOUNT/PERIOD[,name=N][,shadow][,models=M|P*] as the
// limit POST /admin/v1/keys takes (the config's field names), or a usage
// error naming what is wrong; nothing is sent then. The server checks the
// values (a window's range, a name's characters, the tenant's limits).
json quota_spec(const std::string& spec) {
  const std::string bad = "--quota '" + spec + "': ";
  const auto parts = split(spec, ',');
  const std::string& head = parts[0];
  const auto eq = head.find('=');
  const auto slash = head.find('/', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || slash == std::string::npos)
    usage_error(bad + "expected MEASURE=AMOUNT/PERIOD, e.g. tokens=20k/1m");
  const std::string measure = head.substr(0, eq);
  const std::string amount = head.substr(eq + 1, slash - eq - 1);
  const std::string period = head.substr(slash + 1);
  static constexpr const char* kMeasures[] = {"requests", "inputTokens", "outputTokens", "tokens",
                                              "cost"};
  if (std::none_of(std::begin(kMeasures), std::end(kMeasures),
                   [&](const char* m) { return measure == m; }))
    usage_error(bad + "unknown measure '" + measure +
                "' (requests, inputTokens, outputTokens, tokens or cost)");
  const bool cost = measure == "cost";
  if (!(cost ? amount_shaped(amount, {"m", "k", "M", "G", "T"})
             : amount_shaped(amount,
                             {"k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"})))
    usage_error(bad + "the amount '" + amount + "' is not a number like " +
                (cost ? "5, 0.25 or 1.5k" : "100, 20k or 20M"));
  json limit = json::object();
  limit["name"] = measure + "-" + period;
  limit[measure] = amount;
  if (period == "day" || period == "month")
    limit["calendar"] = period;
  else if (duration_shaped(period))
    limit["window"] = period;
  else
    usage_error(bad + "the period '" + period + "' is not day, month or a duration like 1m or 24h");
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p == "shadow") {
      limit["mode"] = "shadow";
    } else if (p.rfind("name=", 0) == 0 && p.size() > 5) {
      limit["name"] = p.substr(5);
    } else if (p.rfind("models=", 0) == 0 && p.size() > 7) {
      limit["models"] = split(p.substr(7), '|');
    } else {
      usage_error(bad + "unexpected '" + p + "' (name=N, shadow or models=M|P*)");
    }
  }
  return limit;
}

// key create --tenant T [--id ID] [--expires RFC3339|UNIX] [--models M,P*]
// [--max-objective O] [--max-tokens N] [--quota SPEC]...
int run_key_create(const Invocation& inv) {
  auto o = parse_options(
      inv.args, 2,
      {"--tenant", "--id", "--expires", "--models", "--max-objective", "--max-tokens", "--quota"});
  json body = json::object();
  if (auto v = o.get("--tenant")) body["tenant"] = *v;
  if (!body.contains("tenant")) usage_error("key create needs --tenant");
  if (auto v = o.get("--id")) body["id"] = *v;
  // The server reads RFC 3339 UTC and unix seconds alike from a string.
  if (auto v = o.get("--expires")) body["expires"] = *v;
  if (auto v = o.get("--models")) {
    json models = json::array();
    for (std::size_t at = 0; at <= v->size();) {
      const std::size_t comma = std::min(v->find(',', at), v->size());
      if (comma > at) models.push_back(v->substr(at, comma - at));
      at = comma + 1;
    }
    body["models"] = models;
  }
  if (auto v = o.get("--max-objective")) body["maxObjective"] = *v;
  if (auto v = o.get("--max-tokens")) {
    const bool digits =
        !v->empty() && v->size() <= 10 && v->find_first_not_of("0123456789") == std::string::npos;
    if (!digits) usage_error("--max-tokens takes a whole number");
    body["maxTokens"] = std::stoull(*v);
  }
  if (const auto specs = o.all("--quota"); !specs.empty()) {
    json quotas = json::array();
    for (const auto& spec : specs) quotas.push_back(quota_spec(spec));
    body["quotas"] = quotas;
  }
  return inv.answer(ctl::Command::kKeyCreate, "",
                    inv.client.call("POST", "/admin/v1/keys",
                                    body.dump(-1, ' ', false, json::error_handler_t::replace)));
}

// key ID | key create --tenant T [--id ID] [--expires RFC3339|UNIX] [scope] |
// key disable ID | key enable ID | key revoke ID
int run_key(const Invocation& inv) {
  const auto& args = inv.args;
  const Client& client = inv.client;
  const std::string& sub = inv.arg(1, "an ID, or create, disable, enable or revoke");
  if (sub == "create") return run_key_create(inv);
  if (sub == "disable" || sub == "enable") {
    const std::string& id = key_id(inv, 2);
    parse_options(args, 3, {});
    const bool disable = sub == "disable";
    return inv.answer(
        disable ? ctl::Command::kKeyDisable : ctl::Command::kKeyEnable, id,
        client.call("PUT", "/admin/v1/keys/" + id, json{{"disabled", disable}}.dump()));
  }
  if (sub == "revoke") {
    const std::string& id = key_id(inv, 2);
    parse_options(args, 3, {});
    return inv.answer(ctl::Command::kKeyRevoke, id, client.call("DELETE", "/admin/v1/keys/" + id));
  }
  const std::string& id = key_id(inv, 1);
  parse_options(args, 2, {});
  return inv.answer(ctl::Command::kKey, id, client.call("GET", "/admin/v1/keys/" + id));
}

// A path segment or query value as sent: unreserved characters as they are,
// any other byte %XX (the server decides what a valid tenant is).
std::string url_encoded(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      out += hex;
    }
  }
  return out;
}

// quotas [--tenant ID]
int run_quotas(const Invocation& inv) {
  auto o = parse_options(inv.args, 1, {"--tenant"});
  std::string path = "/admin/v1/quotas";
  if (auto t = o.get("--tenant")) path += "?tenant=" + url_encoded(*t);
  return inv.answer(ctl::Command::kQuotas, "", inv.client.call("GET", path));
}

// quota reset TENANT
int run_quota(const Invocation& inv) {
  if (inv.arg(1, "reset TENANT") != "reset") usage_error("quota takes reset TENANT");
  const std::string& tenant = inv.arg(2, "a TENANT");
  parse_options(inv.args, 3, {});
  return inv.answer(ctl::Command::kQuotaReset, tenant,
                    inv.client.call("POST", "/admin/v1/quotas/" + url_encoded(tenant) + "/reset"));
}

// Runs the command; returns the exit code.
int run(const Invocation& inv) {
  const std::string& cmd = inv.cmd();
  if (cmd == "flows") return inv.simple(ctl::Command::kFlows, "GET", "/admin/v1/flows");
  if (cmd == "flow") return run_flow(inv);
  if (cmd == "bands") return inv.simple(ctl::Command::kBands, "GET", "/admin/v1/bands");
  if (cmd == "band") return run_band(inv);
  if (cmd == "endpoints") return inv.simple(ctl::Command::kEndpoints, "GET", "/admin/v1/endpoints");
  if (cmd == "reload") return inv.simple(ctl::Command::kReload, "POST", "/admin/v1/reload");
  if (cmd == "drain") return run_drain(inv);
  if (cmd == "keys") return inv.simple(ctl::Command::kKeys, "GET", "/admin/v1/keys");
  if (cmd == "key") return run_key(inv);
  if (cmd == "quotas") return run_quotas(inv);
  if (cmd == "quota") return run_quota(inv);
  if (cmd == "metrics") return inv.simple(ctl::Command::kMetrics, "GET", "/metrics");
  usage_error("unknown command '" + cmd + "'");
}

}  // namespace

int main(int argc, char** argv) {
  Invocation inv;
  std::string token_file;
  admin_from_environment(inv.client);
  if (!parse_arguments(argc, argv, inv, token_file)) {
    std::cout << kUsage;
    return 0;
  }
  read_token(inv.client, token_file);
  if (inv.args.empty()) usage_error("no command");
  return run(inv);
}

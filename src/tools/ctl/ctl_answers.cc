#include "tools/ctl/ctl_answers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

namespace sluice::ctl {
namespace {

using json = nlohmann::json;
constexpr auto kReplace = json::error_handler_t::replace;

// sluice's answers nest three levels (a flow's answer, its flows, their
// outcomes). Deeper is nobody's admin answer, and refusing it keeps dump()
// and copies, which recurse, far from the stack's end.
constexpr int kMaxDepth = 64;
// How much of an unreadable answer a message quotes, and of a refusal's
// message: enough to recognise it, not a screenful.
constexpr std::size_t kMaxQuoted = 200;
constexpr std::size_t kMaxMessage = 1024;
constexpr std::size_t kNoLimit = std::string::npos;

// The length of the well-formed UTF-8 sequence at in[i] that a terminal
// prints as a character, or 0: a stray byte, an overlong form, a surrogate,
// or a C1 control (U+0080..U+009F, which some terminals obey as escapes).
std::size_t printable_utf8(std::string_view in, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(in[i + k]); };
  const unsigned char lead = b(0);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the byte after the lead
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
    if (lead == 0xc2) lo = 0xa0;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    if (lead == 0xe0) lo = 0xa0;
    if (lead == 0xed) hi = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    if (lead == 0xf0) lo = 0x90;
    if (lead == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (in.size() - i < n || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(k) < 0x80 || b(k) > 0xbf) return 0;
  return n;
}

// Text from the admin plane made safe for a terminal: printable ASCII and
// well-formed UTF-8 characters as they are, any other byte escaped (\n, \t,
// \xNN). With a limit, the output stops near `limit` bytes and says how
// long the input was.
std::string printable(std::string_view in, std::size_t limit = kNoLimit) {
  std::string out;
  std::size_t i = 0;
  while (i < in.size()) {
    if (out.size() >= limit) {
      out += "... (" + std::to_string(in.size()) + " bytes)";
      break;
    }
    const auto c = static_cast<unsigned char>(in[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n') {
      out += "\\n", ++i;
    } else if (c == '\r') {
      out += "\\r", ++i;
    } else if (c == '\t') {
      out += "\\t", ++i;
    } else if (std::size_t n = printable_utf8(in, i); n > 0) {
      out.append(in.substr(i, n));
      i += n;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
      ++i;
    }
  }
  return out;
}

// A part of the answer on one line, as JSON (dump escapes C0 controls; DEL
// and C1 controls it leaves, so they are escaped here too).
std::string compact(const json& v) { return printable(v.dump(-1, ' ', false, kReplace)); }

// "a string: \"x\"", "an array: [1,2]": what an answer held where sluice-ctl
// expected something else; nullptr is an absent field.
std::string described(const json* v) {
  if (v == nullptr) return "nothing (no such field)";
  const char* kind = "a value";
  switch (v->type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      kind = "an object";
      break;
    case json::value_t::array:
      kind = "an array";
      break;
    case json::value_t::string:
      kind = "a string";
      break;
    case json::value_t::boolean:
      kind = "a boolean";
      break;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      kind = "a number";
      break;
    case json::value_t::binary:
    case json::value_t::discarded:
      break;
  }
  // ASCII only: whatever the answer holds, the message cannot move a cursor.
  return std::string(kind) + ": " + printable(v->dump(-1, ' ', true, kReplace), kMaxQuoted);
}

// A place in an answer, written the way jq names it: ".flows[0].id".
std::string member_path(const std::string& path, std::string_view key) {
  return path + "." + printable(key, kMaxQuoted);
}
std::string element_path(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// A number as the tables always showed it: integers whole, others as
// iostream prints a double.
std::string number_text(const json& v) {
  // Unsigned first: get_ptr to number_integer_t also answers for unsigned
  // values, whose bits it would read as signed.
  if (const auto* u = v.get_ptr<const json::number_unsigned_t*>()) return std::to_string(*u);
  if (const auto* i = v.get_ptr<const json::number_integer_t*>()) return std::to_string(*i);
  std::ostringstream os;
  if (const auto* d = v.get_ptr<const json::number_float_t*>()) os << *d;
  return os.str();
}

double number_value(const json& v) {
  if (const auto* u = v.get_ptr<const json::number_unsigned_t*>()) return static_cast<double>(*u);
  if (const auto* i = v.get_ptr<const json::number_integer_t*>()) return static_cast<double>(*i);
  if (const auto* d = v.get_ptr<const json::number_float_t*>()) return *d;
  return 0;
}

// printf of one double, however many characters it takes (1e300 ms too).
std::string formatted(const char* format, double v) {
  const int n = std::snprintf(nullptr, 0, format, v);
  if (n <= 0) return "-";
  std::string s(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(s.data(), s.size(), format, v);
  s.resize(static_cast<std::size_t>(n));
  return s;
}

// A member of an object; nullptr when absent (or when the object is not
// there, because a mismatch was already found above it).
const json* member(const json::object_t* o, const char* key) {
  if (o == nullptr) return nullptr;
  const auto it = o->find(key);
  return it == o->end() ? nullptr : &it->second;
}

// The one conversion layer between an answer and what sluice-ctl prints:
// every value is read through it and none of its reads can throw. The first
// value that is not what sluice-ctl expects is kept (where, what was
// expected, what was there) and the reads go on with empty values, so a
// renderer reads top to bottom and the caller checks ok() once at the end.
// A field that is absent or null reads as "-" in a table, as it always did;
// a field of another type is a mismatch.
class Reader {
 public:
  bool ok() const { return !mismatch_; }
  const std::string& mismatch() const { return *mismatch_; }

  const json::object_t* object(const json* v, const std::string& path) {
    if (v != nullptr)
      if (const auto* o = v->get_ptr<const json::object_t*>()) return o;
    expected(path, "a JSON object", v);
    return nullptr;
  }
  const json::array_t* array(const json* v, const std::string& path) {
    if (v != nullptr)
      if (const auto* a = v->get_ptr<const json::array_t*>()) return a;
    expected(path, "a JSON array", v);
    return nullptr;
  }
  // An object or array that may be absent or null: then nullptr, no mismatch.
  const json::object_t* optional_object(const json* v, const std::string& path) {
    return absent(v) ? nullptr : object(v, path);
  }
  const json::array_t* optional_array(const json* v, const std::string& path) {
    return absent(v) ? nullptr : array(v, path);
  }
  bool boolean(const json* v, const std::string& path) {
    if (v != nullptr)
      if (const auto* b = v->get_ptr<const json::boolean_t*>()) return *b;
    expected(path, "a boolean", v);
    return false;
  }
  // The string itself, unescaped (for comparisons); "" on a mismatch.
  std::string text(const json* v, const std::string& path) {
    if (v != nullptr)
      if (const auto* s = v->get_ptr<const json::string_t*>()) return *s;
    expected(path, "a string", v);
    return "";
  }
  std::string number_cell(const json* v, const std::string& path) {
    if (absent(v)) return "-";
    if (v->is_number()) return number_text(*v);
    expected(path, "a number", v);
    return "";
  }
  std::string string_cell(const json* v, const std::string& path, std::size_t limit = kNoLimit) {
    if (absent(v)) return "-";
    if (const auto* s = v->get_ptr<const json::string_t*>()) return printable(*s, limit);
    expected(path, "a string", v);
    return "";
  }
  // A string printed as it came, not escaped (key create's key: escaped, it
  // would not be the key): printable ASCII without spaces, which no terminal
  // obeys and $(...) captures whole. Anything else is a mismatch, and a
  // string is not quoted in it (it may be the key); "" on a mismatch.
  std::string secret(const json* v, const std::string& path) {
    const auto* s = v != nullptr ? v->get_ptr<const json::string_t*>() : nullptr;
    if (s == nullptr) {
      expected(path, "a string", v);
      return "";
    }
    if (!s->empty() &&
        std::all_of(s->begin(), s->end(), [](char c) { return c > 0x20 && c < 0x7f; }))
      return *s;
    fail(path, "expected printable ASCII without spaces, got " +
                   (s->empty() ? std::string("an empty string")
                               : "a string of " + std::to_string(s->size()) +
                                     " bytes with others (not shown)"));
    return "";
  }
  double number_or(const json* v, double fallback, const std::string& path) {
    if (absent(v)) return fallback;
    if (v->is_number()) return number_value(*v);
    expected(path, "a number", v);
    return fallback;
  }

 private:
  static bool absent(const json* v) { return v == nullptr || v->is_null(); }
  void expected(const std::string& path, const char* what, const json* got) {
    if (mismatch_) return;
    fail(path, std::string("expected ") + what + ", got " + described(got));
  }
  void fail(const std::string& path, const std::string& what) {
    if (mismatch_) return;
    mismatch_ = (path.empty() ? "" : (path[0] == '[' ? "." : "") + path + ": ") + what;
  }
  std::optional<std::string> mismatch_;
};

// Left-aligned columns sized to their widest cell.
std::string table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    out += "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  return out;
}

// Each renderer reads what its command prints from the parsed answer.
using Renderer = std::function<std::string(Reader&, const json&)>;

// A list of flows (GET /admin/v1/flows, and the flows of one id).
std::string flows_table(Reader& r, const json::array_t* flows, const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; flows != nullptr && i < flows->size(); ++i) {
    const std::string at = element_path(path, i);
    const json::object_t* f = r.object(&(*flows)[i], at);
    auto cell = [&](const char* key) {
      return r.number_cell(member(f, key), member_path(at, key));
    };
    std::string outcomes;
    const std::string outcomes_at = member_path(at, "outcomes");
    if (const auto* o = r.optional_object(member(f, "outcomes"), outcomes_at))
      for (const auto& [reason, n] : *o)
        outcomes += (outcomes.empty() ? "" : ",") + printable(reason) + "=" +
                    r.number_cell(&n, member_path(outcomes_at, reason));
    const double age_ms =
        r.number_or(member(f, "lastActiveMsAgo"), 0.0, member_path(at, "lastActiveMsAgo"));
    rows.push_back({r.string_cell(member(f, "id"), member_path(at, "id")), cell("priority"),
                    cell("band"), cell("weight"), cell("queued"), cell("queuedBytes"),
                    cell("inFlight"), cell("dispatched"), outcomes.empty() ? "-" : outcomes,
                    cell("tokensCharged"), formatted("%.1fs", age_ms / 1000.0)});
  }
  return table({"ID", "PRIORITY", "BAND", "WEIGHT", "QUEUED", "BYTES", "IN-FLIGHT", "DISPATCHED",
                "REJECTED/EVICTED", "TOKENS", "LAST-ACTIVE"},
               rows);
}

std::string bands_table(Reader& r, const json& answer) {
  std::vector<std::vector<std::string>> rows;
  const json::array_t* bands = r.array(&answer, "");
  for (std::size_t i = 0; bands != nullptr && i < bands->size(); ++i) {
    const std::string at = element_path("", i);
    const json::object_t* b = r.object(&(*bands)[i], at);
    auto cell = [&](const char* key) {
      return r.number_cell(member(b, key), member_path(at, key));
    };
    auto name = [&](const char* key) {
      return r.string_cell(member(b, key), member_path(at, key));
    };
    const bool configured = r.boolean(member(b, "configured"), member_path(at, "configured"));
    rows.push_back({cell("priority"), configured ? "configured" : "default", cell("maxRequests"),
                    cell("maxBytes"), name("fairnessPolicy"), name("orderingPolicy"),
                    cell("antiStarvationShare"), cell("queued"), cell("queuedBytes"),
                    cell("flows")});
  }
  return table({"PRIORITY", "SOURCE", "MAX-REQUESTS", "MAX-BYTES", "FAIRNESS", "ORDERING", "SHARE",
                "QUEUED", "BYTES", "FLOWS"},
               rows);
}

std::string endpoints_table(Reader& r, const json& answer) {
  std::vector<std::vector<std::string>> rows;
  const json::array_t* endpoints = r.array(&answer, "");
  for (std::size_t i = 0; endpoints != nullptr && i < endpoints->size(); ++i) {
    const std::string at = element_path("", i);
    const json::object_t* e = r.object(&(*endpoints)[i], at);
    std::string labels;
    const std::string labels_at = member_path(at, "labels");
    if (const auto* l = r.optional_object(member(e, "labels"), labels_at))
      for (const auto& [name, value] : *l)
        labels += (labels.empty() ? "" : ",") + printable(name) + "=" +
                  r.string_cell(&value, member_path(labels_at, name));
    // null until the first scrape.
    const std::string metrics_at = member_path(at, "metrics");
    const json::object_t* m = r.optional_object(member(e, "metrics"), metrics_at);
    auto metric = [&](const char* key) {
      return m ? r.number_cell(member(m, key), member_path(metrics_at, key)) : "-";
    };
    const std::string age = m ? formatted("%.0fms", r.number_or(member(m, "ageMs"), 0.0,
                                                                member_path(metrics_at, "ageMs")))
                              : "-";
    const bool removed = r.boolean(member(e, "removed"), member_path(at, "removed"));
    const bool healthy = r.boolean(member(e, "healthy"), member_path(at, "healthy"));
    rows.push_back({r.string_cell(member(e, "address"), member_path(at, "address")),
                    r.string_cell(member(e, "engine"), member_path(at, "engine")),
                    removed   ? "removed"
                    : healthy ? "healthy"
                              : "down",
                    metric("waiting"), metric("running"), metric("kvCacheUsage"), age,
                    r.number_cell(member(e, "inFlight"), member_path(at, "inFlight")),
                    labels.empty() ? "-" : labels});
  }
  return table({"ADDRESS", "ENGINE", "HEALTH", "WAITING", "RUNNING", "KV-CACHE", "METRICS-AGE",
                "IN-FLIGHT", "LABELS"},
               rows);
}

// One key's record (GET /admin/v1/keys, .../keys/ID): never the key, only
// its id and prefix.
std::vector<std::string> key_row(Reader& r, const json* v, const std::string& at) {
  const json::object_t* k = r.object(v, at);
  auto name = [&](const char* key) {
    std::string cell = r.string_cell(member(k, key), member_path(at, key));
    return cell.empty() ? std::string("-") : cell;  // a file's key may have no prefix
  };
  const bool disabled = r.boolean(member(k, "disabled"), member_path(at, "disabled"));
  return {name("id"),
          name("tenant"),
          name("prefix"),
          name("expires"),
          disabled ? "disabled" : "enabled",
          name("source")};
}

std::string keys_table(const std::vector<std::vector<std::string>>& rows) {
  return table({"ID", "TENANT", "PREFIX", "EXPIRES", "STATE", "SOURCE"}, rows);
}

// Milliseconds the way Go prints a duration: "0s", "250ms", "6m0s",
// "1h0m0s", "1.5s".
std::string go_duration(double ms) {
  if (!(ms > 0)) return "0s";
  if (ms < 1000) return formatted("%.0fms", ms);
  const double hours = std::floor(ms / 3600000.0);
  const double minutes = std::floor((ms - hours * 3600000.0) / 60000.0);
  std::string seconds = formatted("%.3f", (ms - hours * 3600000.0 - minutes * 60000.0) / 1000.0);
  while (seconds.back() == '0') seconds.pop_back();
  if (seconds.back() == '.') seconds.pop_back();
  std::string out;
  if (hours > 0) out += formatted("%.0fh", hours);
  if (hours > 0 || minutes > 0) out += formatted("%.0fm", minutes);
  return out + seconds + "s";
}

// A cost in micro-units (a whole number, as the answer has it) as the
// decimal the config writes: "5000000" -> "5", "250000" -> "0.25". Other
// text ("-", a fraction) is as it came.
std::string money(const std::string& micros) {
  if (micros.empty() || micros.find_first_not_of("0123456789") != std::string::npos) return micros;
  std::string digits = std::string(micros.size() < 7 ? 7 - micros.size() : 0, '0') + micros;
  std::string whole = digits.substr(0, digits.size() - 6);
  std::string fraction = digits.substr(digits.size() - 6);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  return fraction.empty() ? whole : whole + "." + fraction;
}

// GET /admin/v1/quotas: each limit of each tenant and key on this replica.
std::string quotas_table(Reader& r, const json& answer) {
  std::vector<std::vector<std::string>> rows;
  const json::array_t* limits = r.array(&answer, "");
  for (std::size_t i = 0; limits != nullptr && i < limits->size(); ++i) {
    const std::string at = element_path("", i);
    const json::object_t* q = r.object(&(*limits)[i], at);
    auto name = [&](const char* key) {
      return r.string_cell(member(q, key), member_path(at, key));
    };
    const std::string measure = name("measure");
    auto cell = [&](const char* key) {
      return r.number_cell(member(q, key), member_path(at, key));
    };
    // An amount of the limit's measure (refusals are counts).
    auto amount = [&](const char* key) { return measure == "cost" ? money(cell(key)) : cell(key); };
    // A key's limits are the key's, a tenant's the tenant's.
    const json* key = member(q, "key");
    const std::string owner = key != nullptr ? "key:" + name("key") : "tenant:" + name("tenant");
    std::string period = "-";
    if (const json* c = member(q, "calendar"); c != nullptr && !c->is_null())
      period = name("calendar");
    else if (const json* w = member(q, "windowMs"); w != nullptr && !w->is_null())
      period = go_duration(r.number_or(w, 0.0, member_path(at, "windowMs")));
    const std::string mode = name("mode");
    // A shadow limit refuses nothing: what it would have refused instead.
    const std::string refused = mode == "shadow" ? "would " + cell("wouldRefuse") : cell("refused");
    rows.push_back(
        {owner, name("name"), measure, period, amount("limit"), amount("used"), amount("reserved"),
         amount("remaining"),
         go_duration(r.number_or(member(q, "resetsInMs"), 0.0, member_path(at, "resetsInMs"))),
         mode, refused});
  }
  return table({"OWNER", "NAME", "MEASURE", "PERIOD", "LIMIT", "USED", "RESERVED", "REMAINING",
                "RESETS-IN", "MODE", "REFUSED"},
               rows);
}

std::string reload_lines(Reader& r, const json& answer) {
  const json::object_t* o = r.object(&answer, "");
  // Absent or empty: nothing in that list.
  const json::array_t* applied = r.optional_array(member(o, "applied"), ".applied");
  const json::array_t* restart = r.optional_array(member(o, "restartRequired"), ".restartRequired");
  std::string out = "reloaded";
  if (applied == nullptr || applied->empty())
    out += "; nothing changed";
  else
    out += "; applied: " + compact(*member(o, "applied"));
  out += "\n";
  if (restart != nullptr && !restart->empty())
    out += "changed but needs a restart: " + compact(*member(o, "restartRequired")) + "\n";
  return out;
}

// The parsed answer, or why there is none.
struct Parsed {
  json value;
  std::string problem;  // "" when value is the answer
};

Parsed parse(std::string_view body) {
  Parsed p;
  bool too_deep = false;
  // The callback only sees depths; nlohmann's parser keeps its own stack on
  // the heap, so a deep answer is read without recursion and then refused.
  const json::parser_callback_t depth_check = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth) too_deep = true;
    return !too_deep;
  };
  p.value = json::parse(body.begin(), body.end(), depth_check, /*allow_exceptions=*/false);
  const std::string size = " (" + std::to_string(body.size()) + " bytes): ";
  if (body.empty())
    p.problem = "an empty answer";
  else if (too_deep)
    p.problem = "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels" + size +
                printable(body, kMaxQuoted);
  else if (p.value.is_discarded())
    p.problem = "an answer that is not JSON" + size + printable(body, kMaxQuoted);
  return p;
}

Outcome unreadable(const Request& request, const std::string& why) {
  Outcome o;
  o.exit_code = kExitUnreadable;
  o.err = "sluice-ctl: " + printable(command_name(request), kMaxQuoted) + ": " + why + "\n";
  return o;
}

// A refused call: the server's status, code and message, exit 1. The body
// is sluice's {"error":{"code","message"}} or anything else a server in the
// way answered (a proxy's HTML page): then the body is the message.
Outcome refused(int status, std::string_view body) {
  std::string message = printable(body, kMaxMessage);
  std::string code;
  const Parsed p = parse(body);
  if (p.problem.empty()) {
    const json* e = member(p.value.get_ptr<const json::object_t*>(), "error");
    const json::object_t* error = e ? e->get_ptr<const json::object_t*>() : nullptr;
    if (const json* m = member(error, "message"))
      if (const auto* s = m->get_ptr<const json::string_t*>()) message = printable(*s, kMaxMessage);
    if (const json* c = member(error, "code"))
      if (const auto* s = c->get_ptr<const json::string_t*>()) code = printable(*s, kMaxQuoted);
  }
  Outcome o;
  o.exit_code = kExitRefused;
  o.err = "sluice-ctl: " + std::to_string(status) + (code.empty() ? "" : " " + code) + ": " +
          message + "\n";
  if (status == 401)
    o.err += "sluice-ctl: give the admin token with --token-file FILE or SLUICE_ADMIN_TOKEN\n";
  return o;
}

// The statuses that carry the answer; any other is a refusal.
bool accepted(const Request& request, int status) {
  // POST /admin/v1/drain answers 202 while requests are still in flight;
  // POST /admin/v1/keys 201 with the key it made.
  return status == 200 || (request.command == Command::kDrain && status == 202) ||
         (request.command == Command::kKeyCreate && status == 201);
}

// Reads an answer with `render`: refused, unreadable, or what it prints
// (--json: the answer itself, indented, once it has the expected shape).
Outcome read_with(const Request& request, int status, std::string_view body,
                  const Renderer& render) {
  if (!accepted(request, status)) return refused(status, body);
  const Parsed p = parse(body);
  const char* expected = request.command == Command::kFlows || request.command == Command::kBands ||
                                 request.command == Command::kEndpoints ||
                                 request.command == Command::kKeys ||
                                 request.command == Command::kQuotas
                             ? "a JSON array"
                             : "a JSON object";
  if (!p.problem.empty())
    return unreadable(request, std::string("expected ") + expected + ", got " + p.problem);
  Reader r;
  std::string text = render(r, p.value);
  if (!r.ok()) return unreadable(request, r.mismatch());
  Outcome o;
  o.out = request.as_json ? p.value.dump(2, ' ', false, kReplace) + "\n" : std::move(text);
  return o;
}

struct Drain {
  std::string state;   // as the answer has it
  std::string counts;  // "N queued, M in flight"
};

// key create: the key alone on stdout, and on stderr which key it is and
// that it is not shown again (with --json: the whole answer on stdout).
Outcome read_key_create(const Request& request, int status, std::string_view body) {
  std::string note;
  Outcome o = read_with(request, status, body, [&note](Reader& r, const json& answer) {
    const json::object_t* k = r.object(&answer, "");
    std::string key = r.secret(member(k, "key"), ".key");
    auto cell = [&](const char* name) {
      return r.string_cell(member(k, name), member_path("", name), kMaxQuoted);
    };
    const std::string prefix = cell("prefix");
    note = "sluice-ctl: key " + cell("id") + " for tenant " + cell("tenant") +
           (prefix.empty() || prefix == "-" ? "" : " (" + prefix + "...)") +
           ": store it now, it is not shown again\n";
    return key + "\n";
  });
  if (o.exit_code == kExitDone) o.err = std::move(note);
  return o;
}

// The other key commands; `subject` is the key ID, escaped.
Outcome read_key(const Request& request, int status, std::string_view body,
                 const std::string& subject) {
  switch (request.command) {
    case Command::kKeys:
      return read_with(request, status, body, [](Reader& r, const json& answer) {
        std::vector<std::vector<std::string>> rows;
        const json::array_t* keys = r.array(&answer, "");
        for (std::size_t i = 0; keys != nullptr && i < keys->size(); ++i)
          rows.push_back(key_row(r, &(*keys)[i], element_path("", i)));
        return keys_table(rows);
      });
    case Command::kKey:
      return read_with(request, status, body, [](Reader& r, const json& answer) {
        return keys_table({key_row(r, &answer, "")});
      });
    case Command::kKeyCreate:
      return read_key_create(request, status, body);
    case Command::kKeyDisable:
    case Command::kKeyEnable:
      return read_with(request, status, body, [&](Reader& r, const json& answer) {
        const json::object_t* k = r.object(&answer, "");
        // The state the answer gives, which is the key's now.
        const bool disabled = r.boolean(member(k, "disabled"), ".disabled");
        return "key " + subject + ": " + (disabled ? "disabled" : "enabled") + "\n";
      });
    case Command::kKeyRevoke:
      return read_with(request, status, body, [&](Reader& r, const json& answer) {
        r.object(&answer, "");
        return "key " + subject + ": revoked\n";
      });
    default:
      return unreadable(request, "not a key command");
  }
}

Drain read_drain_state(Reader& r, const json& answer) {
  const json::object_t* o = r.object(&answer, "");
  Drain d;
  d.state = r.text(member(o, "state"), ".state");
  d.counts = r.number_cell(member(o, "queued"), ".queued") + " queued, " +
             r.number_cell(member(o, "inFlight"), ".inFlight") + " in flight";
  return d;
}

}  // namespace

std::string command_name(const Request& request) {
  switch (request.command) {
    case Command::kFlows:
      return "flows";
    case Command::kFlow:
      return "flow " + request.subject;
    case Command::kFlowSet:
      return "flow set " + request.subject;
    case Command::kFlowReset:
      return "flow reset " + request.subject;
    case Command::kBands:
      return "bands";
    case Command::kBandSet:
      return "band set " + request.subject;
    case Command::kBandDelete:
      return "band delete " + request.subject;
    case Command::kEndpoints:
      return "endpoints";
    case Command::kReload:
      return "reload";
    case Command::kDrain:
      return "drain";
    case Command::kDrainWait:
      return "drain --wait";
    case Command::kDrainStatus:
      return "drain status";
    case Command::kDrainCancel:
      return "drain cancel";
    case Command::kKeys:
      return "keys";
    case Command::kKey:
      return "key " + request.subject;
    case Command::kKeyCreate:
      return "key create";
    case Command::kKeyDisable:
      return "key disable " + request.subject;
    case Command::kKeyEnable:
      return "key enable " + request.subject;
    case Command::kKeyRevoke:
      return "key revoke " + request.subject;
    case Command::kQuotas:
      return "quotas";
    case Command::kQuotaReset:
      return "quota reset " + request.subject;
    case Command::kMetrics:
      return "metrics";
  }
  return "?";
}

DrainProgress read_drain(const Request& request, int status, std::string_view body) {
  DrainProgress p;
  Drain d;
  p.outcome = read_with(request, status, body, [&d](Reader& r, const json& answer) {
    d = read_drain_state(r, answer);
    return printable(d.state) + ": " + d.counts + "\n";
  });
  if (p.outcome.exit_code == kExitDone) {
    p.state = std::move(d.state);
    p.counts = std::move(d.counts);
  }
  return p;
}

Outcome read_answer(const Request& request, int status, std::string_view body) {
  // Subjects come from the command line; escaped all the same, as they are
  // echoed next to what the server said.
  const std::string subject = printable(request.subject);
  switch (request.command) {
    case Command::kFlows:
      return read_with(request, status, body, [](Reader& r, const json& answer) {
        return flows_table(r, r.array(&answer, ""), "");
      });
    case Command::kFlow:
      return read_with(request, status, body, [&](Reader& r, const json& answer) {
        const json::object_t* o = r.object(&answer, "");
        const json::object_t* ov = r.object(member(o, "override"), ".override");
        const json::array_t* flows = r.optional_array(member(o, "flows"), ".flows");
        std::string head = "flow " + subject +
                           "  override: " + (ov ? compact(*member(o, "override")) : std::string()) +
                           "\n";
        return head + flows_table(r, flows, ".flows");
      });
    case Command::kFlowSet:
      return read_with(request, status, body, [&](Reader& r, const json& answer) {
        const json::object_t* o = r.object(&answer, "");
        const json::object_t* ov = r.object(member(o, "override"), ".override");
        return "flow " + subject +
               " override: " + (ov ? compact(*member(o, "override")) : std::string()) + "\n";
      });
    case Command::kFlowReset:
      return read_with(request, status, body, [&](Reader& r, const json& answer) {
        r.object(&answer, "");
        return "flow " + subject + ": overrides removed\n";
      });
    case Command::kBands:
      return read_with(request, status, body, bands_table);
    case Command::kBandSet:
      return read_with(request, status, body, [&](Reader& r, const json& answer) {
        r.object(&answer, "");
        return "band " + subject + ": " + compact(answer) + "\n";
      });
    case Command::kBandDelete:
      return read_with(request, status, body, [&](Reader& r, const json& answer) {
        r.object(&answer, "");
        return "band " + subject + ": reverted to the default band\n";
      });
    case Command::kEndpoints:
      return read_with(request, status, body, endpoints_table);
    case Command::kReload:
      return read_with(request, status, body, reload_lines);
    case Command::kDrain:
    case Command::kDrainWait:
    case Command::kDrainStatus:
    case Command::kDrainCancel:
      return read_drain(request, status, body).outcome;
    case Command::kKeys:
    case Command::kKey:
    case Command::kKeyCreate:
    case Command::kKeyDisable:
    case Command::kKeyEnable:
    case Command::kKeyRevoke:
      return read_key(request, status, body, subject);
    case Command::kQuotas:
      return read_with(request, status, body, quotas_table);
    case Command::kQuotaReset:
      return read_with(request, status, body, [&](Reader& r, const json& answer) {
        const json::object_t* o = r.object(&answer, "");
        const bool reset = r.boolean(member(o, "reset"), ".reset");
        return "quota " + subject + ": " +
               (reset ? "reset; its windows count from now (what is in flight stays held)"
                      : "not reset") +
               "\n";
      });
    case Command::kMetrics: {
      // Prometheus text, for a person or a pipe: printed as it came.
      if (status != 200) return refused(status, body);
      Outcome o;
      o.out = std::string(body);
      return o;
    }
  }
  return unreadable(request, "no such command");
}

}  // namespace sluice::ctl

#include "tools/ctl/ctl_answers.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace sluice::ctl {
namespace {

using json = nlohmann::json;

// A refused call: the server's message, exit 1.
Outcome refused(int status, std::string_view body_view) {
  const std::string body(body_view);
  auto j = json::parse(body, nullptr, false);
  std::string message = body;
  std::string code;
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    message = j["error"].value("message", body);
    code = j["error"].value("code", "");
  }
  Outcome o;
  o.exit_code = kExitRefused;
  o.err = "sluice-ctl: " + std::to_string(status) + (code.empty() ? "" : " " + code) + ": " +
          message + "\n";
  if (status == 401)
    o.err += "sluice-ctl: give the admin token with --token-file FILE or SLUICE_ADMIN_TOKEN\n";
  return o;
}

// The answer as JSON, or the Outcome that ends the command.
bool expect_json(int status, std::string_view body, std::initializer_list<int> ok, json& j,
                 Outcome& failed) {
  if (std::find(ok.begin(), ok.end(), status) == ok.end()) {
    failed = refused(status, body);
    return false;
  }
  j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    failed.exit_code = kExitRefused;
    failed.err = "sluice-ctl: the server's answer is not JSON: " + std::string(body) + "\n";
    return false;
  }
  return true;
}

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

std::string num(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_number_integer() || v.is_number_unsigned()) return std::to_string(v.get<long long>());
  if (v.is_number()) {
    std::ostringstream os;
    os << v.get<double>();
    return os.str();
  }
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string outcomes_cell(const json& outcomes) {
  std::string out;
  for (auto it = outcomes.begin(); it != outcomes.end(); ++it) {
    if (!out.empty()) out += ",";
    out += it.key() + "=" + num(it.value());
  }
  return out.empty() ? "-" : out;
}

std::string flows_table(const json& flows) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : flows) {
    char age[32];
    std::snprintf(age, sizeof age, "%.1fs", f.value("lastActiveMsAgo", 0.0) / 1000.0);
    rows.push_back({num(f["id"]), num(f["priority"]), num(f["band"]), num(f["weight"]),
                    num(f["queued"]), num(f["queuedBytes"]), num(f["inFlight"]),
                    num(f["dispatched"]), outcomes_cell(f["outcomes"]), num(f["tokensCharged"]),
                    age});
  }
  return table({"ID", "PRIORITY", "BAND", "WEIGHT", "QUEUED", "BYTES", "IN-FLIGHT", "DISPATCHED",
                "REJECTED/EVICTED", "TOKENS", "LAST-ACTIVE"},
               rows);
}

std::string bands_table(json& j) {
  std::vector<std::vector<std::string>> rows;
  for (auto& b : j)
    rows.push_back({num(b["priority"]), b["configured"].get<bool>() ? "configured" : "default",
                    num(b["maxRequests"]), num(b["maxBytes"]), num(b["fairnessPolicy"]),
                    num(b["orderingPolicy"]), num(b["antiStarvationShare"]), num(b["queued"]),
                    num(b["queuedBytes"]), num(b["flows"])});
  return table({"PRIORITY", "SOURCE", "MAX-REQUESTS", "MAX-BYTES", "FAIRNESS", "ORDERING", "SHARE",
                "QUEUED", "BYTES", "FLOWS"},
               rows);
}

std::string endpoints_table(json& j) {
  std::vector<std::vector<std::string>> rows;
  for (auto& e : j) {
    std::string labels;
    for (auto it = e["labels"].begin(); it != e["labels"].end(); ++it)
      labels += (labels.empty() ? "" : ",") + it.key() + "=" + num(it.value());
    auto& m = e["metrics"];
    char age[32] = "-";
    if (m.is_object()) std::snprintf(age, sizeof age, "%.0fms", m.value("ageMs", 0.0));
    std::string health = e["removed"].get<bool>()   ? "removed"
                         : e["healthy"].get<bool>() ? "healthy"
                                                    : "down";
    rows.push_back(
        {num(e["address"]), num(e["engine"]), health, m.is_object() ? num(m["waiting"]) : "-",
         m.is_object() ? num(m["running"]) : "-", m.is_object() ? num(m["kvCacheUsage"]) : "-", age,
         num(e["inFlight"]), labels.empty() ? "-" : labels});
  }
  return table({"ADDRESS", "ENGINE", "HEALTH", "WAITING", "RUNNING", "KV-CACHE", "METRICS-AGE",
                "IN-FLIGHT", "LABELS"},
               rows);
}

std::string reload_lines(json& j) {
  std::string out = "reloaded";
  if (j["applied"].empty())
    out += "; nothing changed";
  else
    out +=
        "; applied: " + j["applied"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += "\n";
  if (!j["restartRequired"].empty())
    out += "changed but needs a restart: " +
           j["restartRequired"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
  return out;
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
    case Command::kMetrics:
      return "metrics";
  }
  return "?";
}

DrainProgress read_drain(const Request& request, int status, std::string_view body) {
  DrainProgress p;
  json j;
  // POST answers 202 while draining; the others answer 200.
  const bool ok = request.command == Command::kDrain
                      ? expect_json(status, body, {200, 202}, j, p.outcome)
                      : expect_json(status, body, {200}, j, p.outcome);
  if (!ok) return p;
  p.state = j["state"] == "drained" ? "drained" : num(j["state"]);
  p.counts = num(j["queued"]) + " queued, " + num(j["inFlight"]) + " in flight";
  p.outcome.out = request.as_json ? j.dump(2) + "\n"
                                  : num(j["state"]) + ": " + num(j["queued"]) + " queued, " +
                                        num(j["inFlight"]) + " in flight\n";
  return p;
}

Outcome read_answer(const Request& request, int status, std::string_view body) {
  const std::string& subject = request.subject;
  switch (request.command) {
    case Command::kDrain:
    case Command::kDrainWait:
    case Command::kDrainStatus:
    case Command::kDrainCancel:
      return read_drain(request, status, body).outcome;
    case Command::kMetrics: {
      if (status != 200) return refused(status, body);
      Outcome o;
      o.out = std::string(body);
      return o;
    }
    default:
      break;
  }
  Outcome o;
  json j;
  if (!expect_json(status, body, {200}, j, o)) return o;
  if (request.as_json) {
    o.out = j.dump(2) + "\n";
    return o;
  }
  const auto replace = nlohmann::json::error_handler_t::replace;
  switch (request.command) {
    case Command::kFlows:
      o.out = flows_table(j);
      break;
    case Command::kFlow:
      o.out = "flow " + subject + "  override: " + j["override"].dump(-1, ' ', false, replace) +
              "\n" + flows_table(j["flows"]);
      break;
    case Command::kFlowSet:
      o.out =
          "flow " + subject + " override: " + j["override"].dump(-1, ' ', false, replace) + "\n";
      break;
    case Command::kFlowReset:
      o.out = "flow " + subject + ": overrides removed\n";
      break;
    case Command::kBands:
      o.out = bands_table(j);
      break;
    case Command::kBandSet:
      o.out = "band " + subject + ": " + j.dump(-1, ' ', false, replace) + "\n";
      break;
    case Command::kBandDelete:
      o.out = "band " + subject + ": reverted to the default band\n";
      break;
    case Command::kEndpoints:
      o.out = endpoints_table(j);
      break;
    case Command::kReload:
      o.out = reload_lines(j);
      break;
    default:
      break;
  }
  return o;
}

}  // namespace sluice::ctl

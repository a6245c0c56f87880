// sluice-load's reports: a terminal table, a JSON file with every figure,
// and a self-contained HTML page (inline SVG, no external assets).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/load/scenario.h"
#include "tools/load/stats.h"

namespace sluice::load {

std::string terminal_report(const Scenario& s, const RunStats& stats);
nlohmann::json json_report(const Scenario& s, const RunStats& stats, const std::string& target);
std::string html_report(const Scenario& s, const RunStats& stats, const std::string& target);
// One request as a line of --requests (JSON Lines, no newline): its flow's
// name, times in seconds since the run started (-1: did not happen), the
// answer and the endpoint that served it. For the requests behind a tail.
std::string request_line(const Scenario& s, const RequestRecord& r);
// A report as text. The reason, endpoint and error strings come from the
// server's headers: bytes that are not UTF-8 become U+FFFD (a strict dump
// would throw and lose the whole run's report).
std::string report_text(const nlohmann::json& report, int indent = -1);

}  // namespace sluice::load

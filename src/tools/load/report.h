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

}  // namespace sluice::load

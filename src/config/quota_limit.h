// A quota limit (config.h QuotaLimitSpec) read field by field, for every
// place one is written: tenants[].quotas in the config, a key's quotas in
// the key file (auth/api_keys.h) and in the admin API's JSON. One set of
// names, one check, one rendering that reads back the same. Never throws.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"

namespace sluice::config {

// "requests", "inputTokens", "outputTokens", "tokens", "cost".
std::string_view to_string(QuotaMeasure m);

// What is wrong with a limit: the field ("tokens", "models[1]"; "" the
// limit as a whole) and what. Empty `what`: nothing.
struct QuotaLimitError {
  std::string field;
  std::string what;
  explicit operator bool() const { return !what.empty(); }
};

// A limit being read. set() each scalar field as text (a number's digits
// too), add_model() each of `models`, then finish().
class QuotaLimitDraft {
 public:
  // "" or what is wrong with `value`; kUnknownField for a key no limit has.
  std::string set(std::string_view key, std::string_view value);
  std::string add_model(std::string_view model);
  // The limit's own whole checks: a name, exactly one measure, exactly one
  // of window and calendar.
  QuotaLimitError finish(QuotaLimitSpec& out);

  static constexpr std::string_view kUnknownField = "unknown field";

 private:
  QuotaLimitSpec spec_;
  int measures_ = 0;
  bool named_ = false, window_ = false, calendar_ = false;
};

// The limit's fields as text (name first; models apart), what set() reads
// back into the same limit.
std::vector<std::pair<std::string, std::string>> quota_limit_fields(const QuotaLimitSpec& l);

// A duration as set("window", ...) reads it back exactly: "1m", "36h", "1500ms".
std::string format_window(std::chrono::nanoseconds d);

// Every limit of `limits` checked as one list: at most kMaxQuotaLimits, each
// name once. `field` is the offending index's ("[3].name").
QuotaLimitError check_quota_list(const std::vector<QuotaLimitSpec>& limits);

// Model patterns (exact, or a prefix ending in '*'; "*" every model).
// `pattern` can match only models that `allowed` allows (empty: any).
bool model_pattern_inside(std::string_view pattern, const std::vector<std::string>& allowed);
// A price applies to every model `pattern` can match.
bool price_covers(const std::vector<ModelPrice>& prices, std::string_view pattern);

// The tenant limit a key's limit is wider than, or null: one of the same
// measure, window and calendar whose models cover the key's, with a
// smaller amount (a request is charged to both; the key's would never
// bind).
const QuotaLimitSpec* tenant_limit_narrower_than(const QuotaLimitSpec& key_limit,
                                                 const std::vector<QuotaLimitSpec>& tenant_limits);

}  // namespace sluice::config

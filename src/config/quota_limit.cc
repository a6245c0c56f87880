#include "config/quota_limit.h"

#include <algorithm>
#include <set>

#include "config/units.h"

namespace sluice::config {
namespace {

constexpr std::chrono::nanoseconds kMinWindow = std::chrono::seconds(1);
constexpr std::chrono::nanoseconds kMaxWindow = std::chrono::hours(24 * 31);

struct MeasureName {
  std::string_view name;
  QuotaMeasure measure;
};
constexpr MeasureName kMeasures[] = {{"requests", QuotaMeasure::kRequests},
                                     {"inputTokens", QuotaMeasure::kInputTokens},
                                     {"outputTokens", QuotaMeasure::kOutputTokens},
                                     {"tokens", QuotaMeasure::kTokens},
                                     {"cost", QuotaMeasure::kCost}};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

// The amount of a measure's field, or what is wrong with it.
std::string read_amount(QuotaMeasure m, std::string_view value, std::uint64_t& out) {
  const auto v = m == QuotaMeasure::kCost ? parse_micro_units(value) : parse_quantity(value);
  if (!v)
    return m == QuotaMeasure::kCost
               ? "expected an amount like 500, 0.25 or 1.5k (at most 6 decimals), got '" +
                     std::string(value) + "'"
               : "expected a count like 100k or 20M, got '" + std::string(value) + "'";
  if (*v == 0) return "must be greater than zero";
  out = *v;
  return "";
}

// "p*" -> "p"; an exact name stays.
std::string_view stem(std::string_view pattern, bool& prefix) {
  prefix = !pattern.empty() && pattern.back() == '*';
  return prefix ? pattern.substr(0, pattern.size() - 1) : pattern;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// `outer` allows every model `inner` can match.
bool pattern_covers(std::string_view outer, std::string_view inner) {
  bool outer_prefix = false, inner_prefix = false;
  const auto o = stem(outer, outer_prefix);
  const auto i = stem(inner, inner_prefix);
  if (outer_prefix) return starts_with(i, o);
  return !inner_prefix && i == o;
}

}  // namespace

std::string_view to_string(QuotaMeasure m) {
  for (const auto& e : kMeasures)
    if (e.measure == m) return e.name;
  return "tokens";
}

std::string QuotaLimitDraft::set(std::string_view key, std::string_view value) {
  for (const auto& e : kMeasures) {
    if (key != e.name) continue;
    ++measures_;
    spec_.measure = e.measure;
    return read_amount(e.measure, value, spec_.amount);
  }
  if (key == "name") {
    named_ = true;
    if (value.empty() || value.size() > 64 ||
        !std::all_of(value.begin(), value.end(), is_name_char))
      return "a limit's name is 1 to 64 of letters, digits, _ . -";
    spec_.name = std::string(value);
  } else if (key == "window") {
    window_ = true;
    const auto d = parse_duration(value);
    if (!d) return "expected a duration like 1m or 24h, got '" + std::string(value) + "'";
    if (*d < kMinWindow || *d > kMaxWindow)
      return "must be between 1s and 31d (744h), got '" + std::string(value) + "'";
    spec_.window = *d;
  } else if (key == "calendar") {
    calendar_ = true;
    if (value == "day")
      spec_.calendar = QuotaCalendar::kDay;
    else if (value == "month")
      spec_.calendar = QuotaCalendar::kMonth;
    else
      return "expected day or month (UTC), got '" + std::string(value) + "'";
  } else if (key == "mode") {
    if (value != "enforce" && value != "shadow")
      return "expected enforce or shadow, got '" + std::string(value) + "'";
    spec_.shadow = value == "shadow";
  } else if (key == "onExceeded") {
    if (value != "refuse" && value != "queue")
      return "expected refuse or queue, got '" + std::string(value) + "'";
    spec_.queue = value == "queue";
  } else {
    return std::string(kUnknownField);
  }
  return "";
}

std::string QuotaLimitDraft::add_model(std::string_view m) {
  if (spec_.models.size() >= kMaxQuotaModels) return "at most 64 models";
  bool ok = !m.empty() && m.size() <= 256 && m != "*";
  for (std::size_t i = 0; ok && i < m.size(); ++i)
    ok = m[i] > ' ' && m[i] <= '~' && m[i] != '"' && m[i] != '\\' &&
         (m[i] != '*' || i + 1 == m.size());
  if (!ok)
    return "a model is a name, or a prefix ending in '*' (1 to 256 visible characters, no quote "
           "or backslash; omit models: for every model)";
  spec_.models.emplace_back(m);
  return "";
}

QuotaLimitError QuotaLimitDraft::finish(QuotaLimitSpec& out) {
  if (!named_) return {"name", "is required"};
  if (measures_ != 1)
    return {"", "set exactly one of requests, inputTokens, outputTokens, tokens and cost"};
  if (window_ == calendar_) return {"", "set exactly one of window and calendar"};
  out = spec_;
  return {};
}

std::string format_window(std::chrono::nanoseconds d) {
  using namespace std::chrono;
  const auto n = d.count();
  if (n != 0 && n % duration_cast<nanoseconds>(hours(1)).count() == 0)
    return std::to_string(duration_cast<hours>(d).count()) + "h";
  if (n != 0 && n % duration_cast<nanoseconds>(minutes(1)).count() == 0)
    return std::to_string(duration_cast<minutes>(d).count()) + "m";
  if (n != 0 && n % 1000000000 == 0) return std::to_string(n / 1000000000) + "s";
  if (n != 0 && n % 1000000 == 0) return std::to_string(n / 1000000) + "ms";
  return std::to_string(n) + "ns";
}

std::vector<std::pair<std::string, std::string>> quota_limit_fields(const QuotaLimitSpec& l) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("name", l.name);
  out.emplace_back(std::string(to_string(l.measure)), l.measure == QuotaMeasure::kCost
                                                          ? format_micro_units(l.amount)
                                                          : std::to_string(l.amount));
  if (l.calendar == QuotaCalendar::kNone)
    out.emplace_back("window", format_window(l.window));
  else
    out.emplace_back("calendar", l.calendar == QuotaCalendar::kDay ? "day" : "month");
  if (l.shadow) out.emplace_back("mode", "shadow");
  if (l.queue) out.emplace_back("onExceeded", "queue");
  return out;
}

QuotaLimitError check_quota_list(const std::vector<QuotaLimitSpec>& limits) {
  if (limits.size() > kMaxQuotaLimits) return {"", "at most 16 limits"};
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (!names.insert(limits[i].name).second) {
      QuotaLimitError e{"[", "duplicate limit '"};
      e.field.append(std::to_string(i)).append("].name");
      e.what.append(limits[i].name).append("': a name is one limit's");
      return e;
    }
  }
  return {};
}

bool model_pattern_inside(std::string_view pattern, const std::vector<std::string>& allowed) {
  if (allowed.empty()) return true;
  return std::any_of(allowed.begin(), allowed.end(),
                     [&](const std::string& a) { return pattern_covers(a, pattern); });
}

bool price_covers(const std::vector<ModelPrice>& prices, std::string_view pattern) {
  return std::any_of(prices.begin(), prices.end(),
                     [&](const ModelPrice& p) { return pattern_covers(p.model, pattern); });
}

const QuotaLimitSpec* tenant_limit_narrower_than(const QuotaLimitSpec& k,
                                                 const std::vector<QuotaLimitSpec>& tenant) {
  for (const auto& t : tenant) {
    if (t.measure != k.measure || t.window != k.window || t.calendar != k.calendar) continue;
    if (t.amount >= k.amount) continue;
    // The tenant's limit binds every request the key's can count.
    const bool covers =
        t.models.empty() ||
        (!k.models.empty() && std::all_of(k.models.begin(), k.models.end(), [&](const auto& m) {
          return model_pattern_inside(m, t.models);
        }));
    if (covers) return &t;
  }
  return nullptr;
}

}  // namespace sluice::config

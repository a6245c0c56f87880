#include "observe/metrics_text.h"

#include <charconv>
#include <cmath>

namespace sluice::observe {

namespace {
void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}
}  // namespace

void MetricsText::family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += help;
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void MetricsText::labels(Labels l, std::string_view extra_key, std::string_view extra_value) {
  if (l.size() == 0 && extra_key.empty()) return;
  out_ += '{';
  bool first = true;
  auto one = [&](std::string_view k, std::string_view v) {
    if (!first) out_ += ',';
    first = false;
    out_ += k;
    out_ += "=\"";
    for (char c : v) {
      if (c == '\\')
        out_ += "\\\\";
      else if (c == '"')
        out_ += "\\\"";
      else if (c == '\n')
        out_ += "\\n";
      else
        out_ += c;
    }
    out_ += '"';
  };
  for (const auto& [k, v] : l) one(k, v);
  if (!extra_key.empty()) one(extra_key, extra_value);
  out_ += '}';
}

void MetricsText::sample(std::string_view name, Labels l, double value) {
  out_ += name;
  labels(l);
  out_ += ' ';
  append_double(out_, value);
  out_ += '\n';
}

void MetricsText::histogram(std::string_view name, Labels l, std::span<const double> bounds,
                            std::span<const std::uint64_t> counts, double sum) {
  std::uint64_t cumulative = 0;
  const std::string bucket = std::string(name) + "_bucket";
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    std::string le;
    if (i < bounds.size()) {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, bounds[i]);
      le.assign(buf, static_cast<std::size_t>(r.ptr - buf));
    } else {
      le = "+Inf";
    }
    out_ += bucket;
    labels(l, "le", le);
    out_ += ' ';
    out_ += std::to_string(cumulative);
    out_ += '\n';
  }
  out_ += name;
  out_ += "_sum";
  labels(l);
  out_ += ' ';
  append_double(out_, sum);
  out_ += '\n';
  out_ += name;
  out_ += "_count";
  labels(l);
  out_ += ' ';
  out_ += std::to_string(cumulative);
  out_ += '\n';
}

}  // namespace sluice::observe

#include "tools/load/distributions.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sluice::load {

double Distribution::sample(Rng& rng) const {
  double v = a;
  switch (kind) {
    case Kind::kConstant:
      v = a;
      break;
    case Kind::kUniform:
      v = std::uniform_real_distribution<double>(a, b)(rng);
      break;
    case Kind::kNormal:
      v = std::normal_distribution<double>(a, b)(rng);
      break;
    case Kind::kLogNormal:
      v = std::lognormal_distribution<double>(std::log(a), b)(rng);
      break;
    case Kind::kExponential:
      v = std::exponential_distribution<double>(1.0 / a)(rng);
      break;
  }
  return std::clamp(v, min, max);
}

std::uint64_t Distribution::sample_count(Rng& rng) const {
  return static_cast<std::uint64_t>(std::max(1.0, std::round(sample(rng))));
}

double Distribution::mean() const {
  switch (kind) {
    case Kind::kConstant:
      return a;
    case Kind::kUniform:
      return (a + b) / 2;
    case Kind::kNormal:
      return a;
    case Kind::kLogNormal:
      return a * std::exp(b * b / 2);
    case Kind::kExponential:
      return a;
  }
  return a;
}

std::string Distribution::describe() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kConstant:
      os << a;
      break;
    case Kind::kUniform:
      os << "uniform(" << a << ".." << b << ")";
      break;
    case Kind::kNormal:
      os << "normal(" << a << "," << b << ")";
      break;
    case Kind::kLogNormal:
      os << "lognormal(median " << a << ", sigma " << b << ")";
      break;
    case Kind::kExponential:
      os << "exponential(mean " << a << ")";
      break;
  }
  return os.str();
}

}  // namespace sluice::load

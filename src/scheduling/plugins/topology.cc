#include "scheduling/plugins/topology.h"

#include <algorithm>

#include "config/config.h"

namespace sluice::scheduling {

namespace {
constexpr std::array<std::string_view, 4> kLevelNames = {"host", "rack", "zone", "region"};
}

std::string_view level_name(TopologyLevel level) {
  const auto i = static_cast<std::size_t>(level);
  return i < kLevelNames.size() ? kLevelNames[i] : "none";
}

std::optional<TopologyLevel> parse_level(std::string_view name) {
  for (std::size_t i = 0; i < kLevelNames.size(); ++i)
    if (kLevelNames[i] == name) return static_cast<TopologyLevel>(i);
  return std::nullopt;
}

std::string_view TopologyExtractor::value(const Endpoint& e, TopologyLevel level) const {
  const auto i = static_cast<std::size_t>(level);
  if (i >= labels_.size()) return {};
  auto it = e.labels.find(labels_[i]);
  return it == e.labels.end() ? std::string_view() : std::string_view(it->second);
}

bool TopologyExtractor::has_topology(const Endpoint& e) const {
  for (const std::uint32_t id : ids(e))
    if (id != 0) return true;
  return false;
}

TopologyExtractor::Values TopologyExtractor::values(const Endpoint& e) const {
  Values v;
  for (std::size_t l = 0; l < v.size(); ++l) v[l] = value(e, static_cast<TopologyLevel>(l));
  return v;
}

TopologyLevel TopologyExtractor::compare(const Values& peer, const Endpoint& candidate,
                                         TopologyLevel loosest) const {
  const std::size_t last = std::min(peer.size() - 1, static_cast<std::size_t>(loosest));
  for (std::size_t l = 0; l <= last; ++l) {
    const auto level = static_cast<TopologyLevel>(l);
    if (!peer[l].empty() && peer[l] == value(candidate, level)) return level;
  }
  return TopologyLevel::kNone;
}

TopologyExtractor::Ids TopologyExtractor::intern(const Endpoint& e) const {
  Ids ids{};
  for (std::size_t l = 0; l < ids.size(); ++l) {
    const std::string_view v = value(e, static_cast<TopologyLevel>(l));
    if (v.empty()) continue;
    auto [it, added] =
        numbers_.try_emplace(std::string(v), static_cast<std::uint32_t>(numbers_.size() + 1));
    ids[l] = it->second;
  }
  return ids;
}

void TopologyExtractor::begin_pass() const {
  // At most four values an endpoint are live; past eight a slot (and a
  // floor), start the table again: every slot derives its ids anew.
  if (numbers_.size() > 8 * ids_.slots() + 64) {
    numbers_.clear();
    ids_.clear();
    grouped_ = false;
  }
}

void TopologyExtractor::group() const {
  const IdsPass pass = ids_pass();  // the rows of this epoch, derived first if need be
  const std::size_t n = view_->size;
  if (grouped_ && groups_epoch_ == view_->labels_epoch && marks_.size() == n) return;
  // A counting sort of (position, level) by number and level.
  const std::size_t keys = 4 * (numbers_.size() + 1);
  starts_.assign(keys + 1, 0);
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t l = 0; l < 4; ++l)
      if (const std::uint32_t v = pass.rows[p][l]) ++starts_[4 * v + l + 1];
  for (std::size_t k = 0; k < keys; ++k) starts_[k + 1] += starts_[k];
  members_.resize(starts_[keys]);
  std::vector<std::uint32_t> next(starts_.begin(), starts_.end() - 1);
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t l = 0; l < 4; ++l)
      if (const std::uint32_t v = pass.rows[p][l])
        members_[next[4 * v + l]++] = static_cast<std::uint32_t>(p);
  regions_.resize(n);
  zones_.resize(n);
  for (std::size_t p = 0; p < n; ++p) {
    zones_[p] = pass.rows[p][2];
    regions_[p] = pass.rows[p][3];
  }
  marks_.assign(n, 0);
  // The (zone, region) classes: a linear search of the few found so far
  // (once per labels epoch).
  classes_.clear();
  class_of_.resize(n);
  for (std::size_t p = 0; p < n; ++p) {
    const std::array<std::uint32_t, 2> zr{zones_[p], regions_[p]};
    std::size_t c = 0;
    while (c < classes_.size() && classes_[c] != zr) ++c;
    if (c == classes_.size()) classes_.push_back(zr);
    class_of_[p] = static_cast<std::uint32_t>(c);
  }
  codes_ = class_of_;
  groups_epoch_ = view_->labels_epoch;
  grouped_ = true;
}

bool TopologyExtractor::code(const Ids& peer, bool set) const {
  if (!view_ || view_->size == 0) return false;
  if (set) group();  // unmark_codes restores what mark_codes wrote, of the same grouping
  std::uint32_t* codes = codes_.data();  // locals: see visit()
  const std::uint32_t* back = class_of_.data();
  const std::uint32_t* members = members_.data();
  const std::uint32_t* starts = starts_.data();
  const std::size_t keys = starts_.size();
  const auto classes = static_cast<std::uint32_t>(classes_.size());
  // The rack first, so that the host (a tighter group inside it) wins.
  for (int l = 1; l >= 0; --l) {
    const std::uint32_t v = peer[static_cast<std::size_t>(l)];
    const std::size_t key = 4 * static_cast<std::size_t>(v) + static_cast<std::size_t>(l);
    if (v == 0 || key + 1 >= keys) continue;
    const std::uint32_t mark = classes + (l == 0 ? 1u : 0u);
    const std::uint32_t end = starts[key + 1];
    for (std::uint32_t k = starts[key]; k < end; ++k)
      codes[members[k]] = set ? mark : back[members[k]];
  }
  return true;
}

bool TopologyExtractor::visit(const Ids& peer, TopologyLevel loosest, bool set) const {
  if (!view_ || view_->size == 0) return false;
  if (set) group();  // unmark clears what mark wrote, of the same grouping
  // Locals: a byte store may alias anything, so through the members the
  // compiler reloads every pointer after each mark.
  std::uint8_t* marks = marks_.data();
  const std::uint32_t* members = members_.data();
  const std::uint32_t* starts = starts_.data();
  const std::size_t keys = starts_.size();
  // Loosest first, so that a tighter level shared overwrites it.
  for (int l = static_cast<int>(loosest); l >= 0; --l) {
    const std::size_t key = 4 * static_cast<std::size_t>(peer[static_cast<std::size_t>(l)]) +
                            static_cast<std::size_t>(l);
    if (peer[static_cast<std::size_t>(l)] == 0 || key + 1 >= keys) continue;
    const auto code = static_cast<std::uint8_t>(set ? l + 1 : 0);
    const std::uint32_t end = starts[key + 1];
    for (std::uint32_t k = starts[key]; k < end; ++k) marks[members[k]] = code;
  }
  return true;
}

TopologyLevel TopologyExtractor::compare(const Endpoint& peer, const Endpoint& candidate) const {
  return compare(values(peer), candidate);
}

namespace {

// The label names of the declared extractor's spec (defaults where not
// given; the factory has checked them).
TopologyExtractor::LabelNames labels_of(const config::PluginSpec& spec) {
  TopologyExtractor::LabelNames names = TopologyExtractor::default_labels();
  const char* keys[] = {"hostname", "rack", "zone", "region"};
  if (!spec.parameters || !spec.parameters.IsMap()) return names;
  for (std::size_t i = 0; i < 4; ++i) {
    const YAML::Node v = spec.parameters[keys[i]];
    if (v && v.IsScalar() && !v.Scalar().empty()) names[i] = v.Scalar();
  }
  return names;
}

}  // namespace

namespace {

// The warning for a pool of `size` endpoints, `has(label)` telling whether
// any of them carries `label` with a value.
template <class Has>
std::string warning_for(const config::Config& config, std::size_t size, Has has) {
  std::string users;
  std::vector<const config::PluginSpec*> extractors;
  for (const auto& s : config.plugins) {
    if (s.type == TopologyExtractor::kType) extractors.push_back(&s);
    if (s.type == "topology-affinity-filter" || s.type == "topology-affinity-scorer")
      users += (users.empty() ? "" : ", ") + s.name;
  }
  if (users.empty() || size == 0) return {};
  if (extractors.empty())
    return users + ": no topology-extractor is declared, so no endpoint has a topology and " +
           "these plugins have no effect";
  std::string names;
  for (const auto* x : extractors)
    for (const auto& label : labels_of(*x)) {
      if (has(label)) return {};
      names += (names.empty() ? "" : ", ") + label;
    }
  return users + ": no endpoint carries a topology label (" + names +
         "), so these plugins have no effect";
}

template <class Map>
bool has_value(const Map& labels, const std::string& label) {
  auto it = labels.find(label);
  return it != labels.end() && !it->second.empty();
}

}  // namespace

std::string topology_warning(const config::Config& config, std::span<const Labels* const> pool) {
  return warning_for(config, pool.size(), [&](const std::string& label) {
    for (const Labels* l : pool)
      if (has_value(*l, label)) return true;
    return false;
  });
}

std::string topology_warning(const config::Config& config) {
  return warning_for(config, config.endpoints.size(), [&](const std::string& label) {
    for (const auto& e : config.endpoints)
      if (has_value(e.labels, label)) return true;
    return false;
  });
}

}  // namespace sluice::scheduling

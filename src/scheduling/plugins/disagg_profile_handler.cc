#include "scheduling/plugins/disagg_profile_handler.h"

#include <xxhash.h>

#include "scheduling/plugins/topology.h"

namespace sluice::scheduling {

namespace {
const ProfileResult* find(std::span<const ProfileResult> results, const std::string& name) {
  for (const auto& r : results)
    if (r.profile->name == name) return &r;
  return nullptr;
}
double score_of(const ProfileResult& r, const Endpoint* e) {
  for (const auto& s : r.scored)
    if (s.endpoint == e) return s.score;
  return 0;
}
}  // namespace

int DisaggProfileHandler::shared_levels(const Endpoint& a, const Endpoint& b) const {
  int n = 0;
  for (const auto& key : topology_.labels) {
    auto ia = a.labels.find(key);
    auto ib = b.labels.find(key);
    if (ia == a.labels.end() || ib == b.labels.end() || ia->second != ib->second) break;
    ++n;
  }
  return n;
}

void DisaggProfileHandler::level_keys(const ProfileResult& r, std::vector<std::uint64_t>& keys,
                                      std::vector<int>& depth) const {
  const std::size_t levels = topology_.labels.size();
  keys.resize(r.scored.size() * levels);
  depth.resize(r.scored.size());
  for (std::size_t i = 0; i < r.scored.size(); ++i) {
    const Labels& labels = r.scored[i].endpoint->labels;
    std::uint64_t h = 0;
    int n = 0;
    for (; n < static_cast<int>(levels); ++n) {
      auto it = labels.find(topology_.labels[static_cast<std::size_t>(n)]);
      if (it == labels.end()) break;
      // The value's length too: ("ab","c") and ("a","bc") differ.
      h = XXH64(it->second.data(), it->second.size(),
                h ^ (it->second.size() * 0x9E3779B97F4A7C15ull));
      keys[i * levels + static_cast<std::size_t>(n)] = h;
    }
    depth[i] = n;
  }
}

bool DisaggProfileHandler::best_pair_at(const ProfileResult& decode, const ProfileResult& prefill,
                                        int want, const Endpoint*& bd, const Endpoint*& bp,
                                        double& bs) {
  const std::size_t levels = topology_.labels.size();
  const std::size_t at = static_cast<std::size_t>(want - 1);
  groups_.clear();
  // Per key, the two best prefill endpoints, each the first of its score.
  for (std::size_t i = 0; i < prefill.scored.size(); ++i) {
    if (prefill_depth_[i] < want) continue;
    const ScoredEndpoint& ps = prefill.scored[i];
    Best2& g = groups_[prefill_keys_[i * levels + at]];
    if (!g.first || ps.score > g.first->score) {
      g.second = g.first;
      g.first = &ps;
    } else if (!g.second || ps.score > g.second->score) {
      g.second = &ps;
    }
  }
  for (std::size_t i = 0; i < decode.scored.size(); ++i) {
    if (decode_depth_[i] < want) continue;
    const ScoredEndpoint& ds = decode.scored[i];
    auto it = groups_.find(decode_keys_[i * levels + at]);
    if (it == groups_.end()) continue;
    // One endpoint in both roles is not a pair: the group's next best.
    const ScoredEndpoint* ps =
        it->second.first->endpoint == ds.endpoint ? it->second.second : it->second.first;
    // A hash collision is checked against the labels themselves.
    if (!ps || shared_levels(*ds.endpoint, *ps->endpoint) < want) continue;
    const double s = (ds.score + ps->score) / 2;
    if (s > bs) {
      bs = s;
      bd = ds.endpoint;
      bp = ps->endpoint;
    }
  }
  return bd != nullptr;
}

void DisaggProfileHandler::pick(CycleState& cycle, const Request& request,
                                std::span<const Profile> profiles,
                                std::span<const ProfileResult> results,
                                std::vector<const Profile*>& next) {
  auto profile = [&](const std::string& name) -> const Profile* {
    for (const auto& p : profiles)
      if (p.name == name) return &p;
    return nullptr;
  };
  if (results.empty()) {
    if (const Profile* d = profile(decode_)) next.push_back(d);
    return;
  }
  if (results.size() != 1 || !decider_) return;
  const ProfileResult& decode = results.front();
  if (!decode.ok) return;
  const Profile* p = profile(prefill_);
  if (p && decider_->disaggregate(cycle, request, *decode.targets.front())) {
    // The prefill profile's topology plugins place it near decode.
    cycle.put(kPeerEndpointKey, decode.targets.front());
    next.push_back(p);
  }
}

void DisaggProfileHandler::count_decision(std::string_view model, bool prefill_used) {
  if (model.empty()) model = "unknown";
  auto it = decisions_.find(model);
  if (it == decisions_.end()) {
    // One allocation per new model name, never past the bound.
    const bool full = decisions_.size() - decisions_.count(kOtherModel) >= kMaxDecisionModels;
    it = decisions_.try_emplace(std::string(full ? kOtherModel : model)).first;
  }
  (prefill_used ? it->second.prefill_decode : it->second.decode_only) += 1;
}

SchedulingResult DisaggProfileHandler::process_results(CycleState&, const Request& request,
                                                       std::span<const ProfileResult> results) {
  SchedulingResult r;
  r.primary_profile = decode_;
  const ProfileResult* decode = find(results, decode_);
  if (!decode || !decode->ok) {
    r.error =
        "failed to find available decode workers" + (decode ? ": " + decode->error : std::string());
    return r;
  }
  r.ok = true;
  const Endpoint* d = decode->targets.front();
  const ProfileResult* prefill = find(results, prefill_);
  // No prefill endpoint: decode does the prefill itself rather than fail.
  if (!prefill || !prefill->ok) {
    r.targets = decode->targets;
    r.serving.push_back(d);
    count_decision(request.model, false);
    return r;
  }
  count_decision(request.model, true);
  const Endpoint* p = prefill->targets.front();
  if (topology_.enabled && !topology_.labels.empty()) {
    const double best = (score_of(*decode, d) + score_of(*prefill, p)) / 2;
    const int levels = static_cast<int>(topology_.labels.size());
    level_keys(*decode, decode_keys_, decode_depth_);
    level_keys(*prefill, prefill_keys_, prefill_depth_);
    // Deepest shared level first: a same-rack pair within the margin beats
    // a same-zone pair, which beats none.
    for (int want = levels; want > shared_levels(*d, *p); --want) {
      const Endpoint *bd = nullptr, *bp = nullptr;
      double bs = -1;
      if (best_pair_at(*decode, *prefill, want, bd, bp, bs) &&
          bs >= best - topology_.margin - 1e-12) {
        d = bd;
        p = bp;
        break;
      }
    }
  }
  r.targets.push_back(d);
  for (const Endpoint* e : decode->targets)
    if (e != d) r.targets.push_back(e);
  r.serving.push_back(d);
  r.serving.push_back(p);
  r.headers.emplace_back(std::string(kPrefillerHeader), p->address);
  return r;
}

}  // namespace sluice::scheduling

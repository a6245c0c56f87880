#include "scheduling/plugins/disagg_profile_handler.h"

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
    // Deepest shared level first: a same-rack pair within the margin beats
    // a same-zone pair, which beats none.
    for (int want = levels; want > shared_levels(*d, *p); --want) {
      const Endpoint *bd = nullptr, *bp = nullptr;
      double bs = -1;
      for (const auto& ds : decode->scored)
        for (const auto& ps : prefill->scored) {
          if (ds.endpoint == ps.endpoint || shared_levels(*ds.endpoint, *ps.endpoint) < want)
            continue;
          const double s = (ds.score + ps.score) / 2;
          if (s > bs) {
            bs = s;
            bd = ds.endpoint;
            bp = ps.endpoint;
          }
        }
      if (bd && bs >= best - topology_.margin - 1e-12) {
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

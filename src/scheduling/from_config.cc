#include "scheduling/from_config.h"

#include <random>
#include <set>

#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "scheduling/plugins/by_label_filter.h"
#include "scheduling/plugins/by_label_selector_filter.h"
#include "scheduling/plugins/disagg_profile_handler.h"
#include "scheduling/plugins/in_flight_requests_scorer.h"
#include "scheduling/plugins/kv_cache_utilization_scorer.h"
#include "scheduling/plugins/lora_affinity_scorer.h"
#include "scheduling/plugins/max_score_picker.h"
#include "scheduling/plugins/prefix_based_pd_decider.h"
#include "scheduling/plugins/prefix_cache_scorer.h"
#include "scheduling/plugins/queue_scorer.h"
#include "scheduling/plugins/random_picker.h"
#include "scheduling/plugins/running_requests_size_scorer.h"
#include "scheduling/plugins/saturation_filter.h"
#include "scheduling/plugins/session_affinity_scorer.h"
#include "scheduling/plugins/single_profile_handler.h"
#include "scheduling/plugins/weighted_random_picker.h"
#include "sluice/extensions.h"

namespace sluice::scheduling {

namespace {

using config::ConfigError;

std::uint64_t seed() { return std::random_device{}(); }

// Build order: what others refer to comes first.
int phase(const std::string& type) {
  if (type == ApproxPrefixCacheProducer::kType) return 0;
  if (type == PrefixBasedPdDecider::kType) return 2;
  if (type == SingleProfileHandler::kType || type == DisaggProfileHandler::kType) return 3;
  return 1;
}

class Context final : public PluginContext {
 public:
  Plugin* find(std::string_view name) const override {
    for (const auto& p : plugins)
      if (p->name() == name) return p.get();
    return nullptr;
  }
  std::vector<Plugin*> of_type(std::string_view type) const override {
    std::vector<Plugin*> out;
    for (const auto& p : plugins)
      if (p->type() == type) out.push_back(p.get());
    return out;
  }
  std::vector<std::unique_ptr<Plugin>> plugins;
};

bool is_scheduling(const Plugin* p) {
  return dynamic_cast<const Filter*>(p) || dynamic_cast<const Scorer*>(p) ||
         dynamic_cast<const Picker*>(p);
}

[[noreturn]] void fail_at(const config::Config& c, int line, const std::string& path,
                          const std::string& what) {
  throw ConfigError(c.source + ":" + std::to_string(line) + ": " + path + ": " + what);
}

}  // namespace

std::unique_ptr<Scheduler> build_scheduler(const config::Config& c, Scheduler::Options options) {
  const ExtensionRegistry& registry = builtin_extensions();
  Context ctx;

  // Which declared plugins the scheduler builds (flow-control policies and
  // data-layer plugins are built elsewhere or built in).
  std::vector<const config::PluginSpec*> specs;
  auto is_detector = [](const std::string& t) {
    return is_builtin(t, ExtensionKind::kSaturationDetector);
  };
  for (const auto& s : c.plugins)
    if (registry.factory<Plugin>(s.type) || is_detector(s.type)) specs.push_back(&s);
  const bool any_declared_scheduling = [&] {
    for (const auto* s : specs)
      if (!is_detector(s->type)) return true;
    return false;
  }();

  // Synthesized plugins (defaults) use plain specs.
  std::vector<config::PluginSpec> synthesized;
  std::vector<config::SchedulingProfileSpec> profiles = c.scheduling_profiles;
  if (profiles.empty() && !any_declared_scheduling) {
    for (const char* t :
         {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "max-score-picker"})
      synthesized.push_back(config::PluginSpec{t, t, YAML::Node(), 0});
    profiles.push_back(config::SchedulingProfileSpec{"default",
                                                     {{"queue-scorer", 2.0, 0},
                                                      {"kv-cache-utilization-scorer", 2.0, 0},
                                                      {"prefix-cache-scorer", 3.0, 0},
                                                      {"max-score-picker", std::nullopt, 0}}});
  }
  // Producers for prefix scorers that have none, from the scorer's parameters.
  bool has_producer = false;
  for (const auto* s : specs)
    has_producer = has_producer || s->type == ApproxPrefixCacheProducer::kType;
  if (!has_producer) {
    for (const auto* s : specs)
      if (s->type == PrefixCacheScorer::kType || s->type == PrefixBasedPdDecider::kType) {
        YAML::Node params;
        if (s->type == PrefixCacheScorer::kType) params = s->parameters;
        synthesized.push_back(config::PluginSpec{std::string(ApproxPrefixCacheProducer::kType),
                                                 std::string(ApproxPrefixCacheProducer::kType),
                                                 params, s->line});
        has_producer = true;
        break;
      }
    if (!has_producer)
      for (const auto& s : synthesized)
        if (s.type == PrefixCacheScorer::kType) {
          synthesized.insert(
              synthesized.begin(),
              config::PluginSpec{std::string(ApproxPrefixCacheProducer::kType),
                                 std::string(ApproxPrefixCacheProducer::kType), YAML::Node(), 0});
          break;
        }
  }
  for (auto& s : synthesized) specs.push_back(&s);

  // Build by phase, in declaration order within a phase.
  for (int ph = 0; ph <= 3; ++ph) {
    for (const auto* s : specs) {
      if (phase(s->type) != ph) continue;
      PluginParams params(s->parameters, c.source, "plugins[" + s->name + "].parameters", s->line);
      std::unique_ptr<Plugin> plugin;
      if (is_detector(s->type)) {
        // Built through the extension registry (its factories are
        // src/extensions/'s): scheduling/ includes nothing of flowcontrol/.
        auto it = c.detectors.find(s->name);
        config::SaturationDetectorSpec spec;
        if (it != c.detectors.end()) spec = it->second;
        spec.type = s->type;
        plugin = std::make_unique<SaturationFilter>(
            registry.build<flowcontrol::SaturationDetector>(spec.type, spec),
            s->type == "utilization-detector");
      } else {
        plugin = (*registry.factory<Plugin>(s->type))(params, ctx);
      }
      plugin->set_name(s->name);
      ctx.plugins.push_back(std::move(plugin));
    }
  }

  // No profiles but plugins declared: one profile with every filter,
  // scorer and picker, in declaration order (GIE: all of them).
  if (profiles.empty()) {
    config::SchedulingProfileSpec def{"default", {}};
    for (const auto& s : c.plugins) {
      Plugin* p = ctx.find(s.name);
      if (!p || !is_scheduling(p)) continue;
      if (is_detector(s.type)) continue;  // gate, not filter
      def.plugins.push_back(config::ProfilePluginRef{s.name, std::nullopt, s.line});
    }
    profiles.push_back(std::move(def));
  }

  Picker* first_picker = nullptr;
  std::string first_picker_name;
  for (const auto& s : c.plugins) {
    if (auto* pk = dynamic_cast<Picker*>(ctx.find(s.name))) {
      first_picker = pk;
      first_picker_name = s.name;
      break;
    }
  }

  std::vector<Profile> built;
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    const auto& ps = profiles[i];
    Profile prof;
    prof.name = ps.name;
    for (std::size_t k = 0; k < ps.plugins.size(); ++k) {
      const auto& ref = ps.plugins[k];
      const std::string path =
          "schedulingProfiles[" + ps.name + "].plugins[" + std::to_string(k) + "]";
      Plugin* p = ctx.find(ref.plugin_ref);
      if (!p) {
        std::string type;
        for (const auto& s : c.plugins)
          if (s.name == ref.plugin_ref) type = s.type;
        fail_at(c, ref.line, path + ".pluginRef",
                "'" + ref.plugin_ref + "' is a " + (type.empty() ? "unknown plugin" : type) +
                    ", not a filter, scorer or picker");
      }
      bool used = false;
      if (auto* f = dynamic_cast<Filter*>(p)) {
        prof.filters.emplace_back(f, p->name());
        used = true;
      }
      if (auto* sc = dynamic_cast<Scorer*>(p)) {
        prof.scorers.push_back(WeightedScorer{sc, ref.weight.value_or(1.0), p->name()});
        used = true;
      }
      if (auto* pk = dynamic_cast<Picker*>(p)) {
        if (prof.picker)
          fail_at(c, ref.line, path + ".pluginRef",
                  "profile '" + ps.name + "' already has picker '" + prof.picker_name +
                      "'; a profile has exactly one");
        prof.picker = pk;
        prof.picker_name = p->name();
        used = true;
      }
      if (!used)
        fail_at(c, ref.line, path + ".pluginRef",
                "'" + ref.plugin_ref + "' is a " + std::string(p->type()) +
                    ", not a filter, scorer or picker");
    }
    if (!prof.picker) {
      if (!first_picker) {
        auto pk = std::make_unique<MaxScorePicker>(1, seed());
        pk->set_name("max-score-picker");
        first_picker = pk.get();
        first_picker_name = pk->name();
        ctx.plugins.push_back(std::move(pk));
      }
      prof.picker = first_picker;
      prof.picker_name = first_picker_name;
    }
    built.push_back(std::move(prof));
  }

  // The profile handler.
  ProfileHandler* handler = nullptr;
  std::string handler_name;
  for (const auto& s : c.plugins) {
    if (auto* h = dynamic_cast<ProfileHandler*>(ctx.find(s.name))) {
      if (handler)
        fail_at(c, s.line, "plugins[" + s.name + "]",
                "a second profile handler ('" + handler_name + "' is one)");
      handler = h;
      handler_name = s.name;
      if (s.type == SingleProfileHandler::kType && built.size() > 1)
        fail_at(c, s.line, "plugins[" + s.name + "]",
                "single-profile-handler runs one profile, but " + std::to_string(built.size()) +
                    " are configured");
      if (auto* d = dynamic_cast<DisaggProfileHandler*>(h)) {
        bool found = false;
        for (const auto& p : built) found = found || p.name == d->decode_profile();
        if (!found)
          fail_at(c, s.line, "plugins[" + s.name + "]",
                  "no scheduling profile named '" + d->decode_profile() + "' (the decode profile)");
      }
    }
  }
  if (!handler) {
    if (built.size() > 1)
      throw ConfigError(c.source + ": schedulingProfiles: " + std::to_string(built.size()) +
                        " profiles but no profile handler configured (declare "
                        "disagg-profile-handler or another)");
    auto h = std::make_unique<SingleProfileHandler>();
    h->set_name("single-profile-handler");
    handler = h.get();
    handler_name = h->name();
    ctx.plugins.push_back(std::move(h));
  }

  RequestPreparation prep;
  for (const auto& p : ctx.plugins)
    if (auto* prod = dynamic_cast<ApproxPrefixCacheProducer*>(p.get())) {
      prep.prefix_hashes = true;
      prep.block_size_tokens = prod->params().block_size_tokens;
      prep.max_prefix_blocks = prod->params().max_prefix_blocks_to_match;
      break;
    }
  return std::make_unique<Scheduler>(std::move(ctx.plugins), std::move(built), handler,
                                     handler_name, prep, options);
}

}  // namespace sluice::scheduling

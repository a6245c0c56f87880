#include "scheduling/from_config.h"

#include <random>
#include <set>

#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "scheduling/plugins/by_label_filter.h"
#include "scheduling/plugins/by_label_selector_filter.h"
#include "scheduling/plugins/data_parallel_profile_handler.h"
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
  // Other producers (topology-extractor, inflight-load-producer) may read
  // the prefix producer's; every other plugin may read a producer, whatever
  // the order they are declared in; deciders before the handlers.
  if (is_builtin(type, ExtensionKind::kDataProducer)) return 1;
  if (is_builtin(type, ExtensionKind::kPdDecider)) return 3;
  if (type == SingleProfileHandler::kType || type == DisaggProfileHandler::kType) return 4;
  return 2;
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

// A saturation detector declared as a plugin: a gate (and a filter only
// where a profile lists it).
bool is_detector(const std::string& type) {
  return is_builtin(type, ExtensionKind::kSaturationDetector);
}

// Which declared plugins the scheduler builds (flow-control policies and
// data-layer plugins are built elsewhere or built in).
std::vector<const config::PluginSpec*> scheduler_specs(const config::Config& c,
                                                       const ExtensionRegistry& registry) {
  std::vector<const config::PluginSpec*> specs;
  for (const auto& s : c.plugins)
    if (registry.factory<Plugin>(s.type) || is_detector(s.type)) specs.push_back(&s);
  return specs;
}

// GIE's default profile, for a config that declares neither profiles nor
// scheduling plugins: its plugins into `synthesized` (plain specs), itself
// into `profiles`.
void add_default_profile(std::vector<config::PluginSpec>& synthesized,
                         std::vector<config::SchedulingProfileSpec>& profiles) {
  for (const char* t :
       {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "max-score-picker"})
    synthesized.push_back(config::PluginSpec{t, t, YAML::Node(), 0});
  profiles.push_back(config::SchedulingProfileSpec{"default",
                                                   {{"queue-scorer", 2.0, 0},
                                                    {"kv-cache-utilization-scorer", 2.0, 0},
                                                    {"prefix-cache-scorer", 3.0, 0},
                                                    {"max-score-picker", std::nullopt, 0}}});
}

// Producers for prefix scorers that have none, from the scorer's parameters
// (a declared scorer's or decider's; else a synthesized scorer gets one
// with default parameters, built first).
void add_missing_producer(const std::vector<const config::PluginSpec*>& specs,
                          std::vector<config::PluginSpec>& synthesized) {
  bool has_producer = false;
  for (const auto* s : specs)
    has_producer = has_producer || s->type == ApproxPrefixCacheProducer::kType;
  if (has_producer) return;
  for (const auto* s : specs)
    if (s->type == PrefixCacheScorer::kType || s->type == PrefixBasedPdDecider::kType) {
      YAML::Node params;
      if (s->type == PrefixCacheScorer::kType) params = s->parameters;
      synthesized.push_back(config::PluginSpec{std::string(ApproxPrefixCacheProducer::kType),
                                               std::string(ApproxPrefixCacheProducer::kType),
                                               params, s->line});
      return;
    }
  for (const auto& s : synthesized)
    if (s.type == PrefixCacheScorer::kType) {
      synthesized.insert(
          synthesized.begin(),
          config::PluginSpec{std::string(ApproxPrefixCacheProducer::kType),
                             std::string(ApproxPrefixCacheProducer::kType), YAML::Node(), 0});
      return;
    }
}

// The prefix-cache-scorer whose parameters a producer was made from
// (add_missing_producer), or null.
const config::PluginSpec* params_owner(const std::vector<const config::PluginSpec*>& specs,
                                       const config::PluginSpec& s) {
  if (s.type != ApproxPrefixCacheProducer::kType || !s.parameters || s.parameters.IsNull())
    return nullptr;
  for (const auto* o : specs)
    if (o != &s && o->type == PrefixCacheScorer::kType && o->parameters.is(s.parameters)) return o;
  return nullptr;
}

// Builds one plugin: a saturation detector as a filter (with its detector
// parameters), anything else through its registered factory. A producer
// made from a scorer's parameters reads only its own fields there, and
// names the scorer in its errors: the rest are the scorer's to check.
std::unique_ptr<Plugin> build_plugin(const config::Config& c, const ExtensionRegistry& registry,
                                     const config::PluginSpec& s, Context& ctx,
                                     const config::PluginSpec* owner) {
  PluginParams params(s.parameters, c.source,
                      "plugins[" + (owner ? owner->name : s.name) + "].parameters", s.line);
  if (owner) return std::make_unique<ApproxPrefixCacheProducer>(read_prefix_params(params));
  if (is_detector(s.type)) {
    // Built through the extension registry (its factories are
    // src/extensions/'s): scheduling/ includes nothing of flowcontrol/.
    auto it = c.detectors.find(s.name);
    config::SaturationDetectorSpec spec;
    if (it != c.detectors.end()) spec = it->second;
    spec.type = s.type;
    return std::make_unique<SaturationFilter>(
        registry.build<flowcontrol::SaturationDetector>(spec.type, spec),
        s.type == "utilization-detector");
  }
  return (*registry.factory<Plugin>(s.type))(params, ctx);
}

// Builds every spec into ctx, by phase, in declaration order within a phase.
void build_plugins(const config::Config& c, const ExtensionRegistry& registry,
                   const std::vector<const config::PluginSpec*>& specs, Context& ctx) {
  for (int ph = 0; ph <= 4; ++ph) {
    for (const auto* s : specs) {
      if (phase(s->type) != ph) continue;
      std::unique_ptr<Plugin> plugin = build_plugin(c, registry, *s, ctx, params_owner(specs, *s));
      plugin->set_name(s->name);
      ctx.plugins.push_back(std::move(plugin));
    }
  }
}

// No profiles but plugins declared: one profile with every filter,
// scorer and picker, in declaration order (GIE: all of them).
config::SchedulingProfileSpec profile_of_all(const config::Config& c, const Context& ctx) {
  config::SchedulingProfileSpec def{"default", {}};
  for (const auto& s : c.plugins) {
    Plugin* p = ctx.find(s.name);
    if (!p || !is_scheduling(p)) continue;
    if (is_detector(s.type)) continue;  // gate, not filter
    def.plugins.push_back(config::ProfilePluginRef{s.name, std::nullopt, s.line});
  }
  return def;
}

// A picker and its instance name.
struct NamedPicker {
  Picker* picker = nullptr;
  std::string name;
};

// The first picker declared (none: null).
NamedPicker first_declared_picker(const config::Config& c, const Context& ctx) {
  for (const auto& s : c.plugins)
    if (auto* pk = dynamic_cast<Picker*>(ctx.find(s.name))) return NamedPicker{pk, s.name};
  return {};
}

// One profile from its spec: each plugin it refers to as a filter, scorer
// (weighing 1 unless given) and/or picker (one at most). No picker yet if
// the spec names none.
Profile profile_from(const config::Config& c, const config::SchedulingProfileSpec& ps,
                     const Context& ctx) {
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
  return prof;
}

// A profile without a picker gets the first declared one, else a
// max-score-picker (built into ctx the first time one is needed).
void give_default_picker(Profile& prof, NamedPicker& first, Context& ctx) {
  if (!first.picker) {
    auto pk = std::make_unique<MaxScorePicker>(1, seed());
    pk->set_name("max-score-picker");
    first.picker = pk.get();
    first.name = pk->name();
    ctx.plugins.push_back(std::move(pk));
  }
  prof.picker = first.picker;
  prof.picker_name = first.name;
}

// A profile handler and its instance name.
struct NamedHandler {
  ProfileHandler* handler = nullptr;
  std::string name;
};

// The declared profile handler (at most one), checked against the profiles
// it runs: none declared, null.
NamedHandler declared_handler(const config::Config& c, const std::vector<Profile>& built,
                              const Context& ctx) {
  NamedHandler out;
  for (const auto& s : c.plugins) {
    if (auto* h = dynamic_cast<ProfileHandler*>(ctx.find(s.name))) {
      if (out.handler)
        fail_at(c, s.line, "plugins[" + s.name + "]",
                "a second profile handler ('" + out.name + "' is one)");
      out.handler = h;
      out.name = s.name;
      if ((s.type == SingleProfileHandler::kType || s.type == DataParallelProfileHandler::kType) &&
          built.size() > 1)
        fail_at(
            c, s.line, "plugins[" + s.name + "]",
            s.type + " runs one profile, but " + std::to_string(built.size()) + " are configured");
      if (auto* d = dynamic_cast<DisaggProfileHandler*>(h)) {
        bool found = false;
        for (const auto& p : built) found = found || p.name == d->decode_profile();
        if (!found)
          fail_at(c, s.line, "plugins[" + s.name + "]",
                  "no scheduling profile named '" + d->decode_profile() + "' (the decode profile)");
      }
    }
  }
  return out;
}

// The profile handler: the declared one, else single-profile-handler (built
// into ctx) if there is one profile, else an error.
NamedHandler profile_handler(const config::Config& c, const std::vector<Profile>& built,
                             Context& ctx) {
  NamedHandler out = declared_handler(c, built, ctx);
  if (out.handler) return out;
  if (built.size() > 1)
    throw ConfigError(c.source + ": schedulingProfiles: " + std::to_string(built.size()) +
                      " profiles but no profile handler configured (declare "
                      "disagg-profile-handler or another)");
  auto h = std::make_unique<SingleProfileHandler>();
  h->set_name("single-profile-handler");
  out.handler = h.get();
  out.name = h->name();
  ctx.plugins.push_back(std::move(h));
  return out;
}

// What a request needs before scheduling: prefix hashes, as the first
// prefix-cache producer's parameters say, if there is one.
RequestPreparation preparation(const Context& ctx) {
  RequestPreparation prep;
  for (const auto& p : ctx.plugins)
    if (auto* prod = dynamic_cast<ApproxPrefixCacheProducer*>(p.get())) {
      prep.prefix_hashes = true;
      prep.block_size_tokens = prod->params().block_size_tokens;
      prep.max_prefix_blocks = prod->params().max_prefix_blocks_to_match;
      break;
    }
  return prep;
}

}  // namespace

std::unique_ptr<Scheduler> build_scheduler(const config::Config& c, Scheduler::Options options) {
  const ExtensionRegistry& registry = builtin_extensions();
  Context ctx;

  std::vector<const config::PluginSpec*> specs = scheduler_specs(c, registry);
  const bool any_declared_scheduling = [&] {
    for (const auto* s : specs)
      if (!is_detector(s->type)) return true;
    return false;
  }();

  // Synthesized plugins (defaults) use plain specs.
  std::vector<config::PluginSpec> synthesized;
  std::vector<config::SchedulingProfileSpec> profiles = c.scheduling_profiles;
  if (profiles.empty() && !any_declared_scheduling) add_default_profile(synthesized, profiles);
  add_missing_producer(specs, synthesized);
  for (auto& s : synthesized) specs.push_back(&s);

  build_plugins(c, registry, specs, ctx);
  if (profiles.empty()) profiles.push_back(profile_of_all(c, ctx));

  NamedPicker first_picker = first_declared_picker(c, ctx);
  std::vector<Profile> built;
  for (const auto& ps : profiles) {
    Profile prof = profile_from(c, ps, ctx);
    if (!prof.picker) give_default_picker(prof, first_picker, ctx);
    built.push_back(std::move(prof));
  }

  NamedHandler handler = profile_handler(c, built, ctx);
  const RequestPreparation prep = preparation(ctx);
  return std::make_unique<Scheduler>(std::move(ctx.plugins), std::move(built), handler.handler,
                                     handler.name, prep, options);
}

}  // namespace sluice::scheduling

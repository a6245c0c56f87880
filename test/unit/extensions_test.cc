// The one extension registry: every declared type is built by its kind's
// factory and names itself; the typed lookups refuse the wrong interface;
// config and admin messages list the registry's types.
#include "sluice/extensions.h"

#include <gtest/gtest.h>

#include <string>

#include "admin/admin_requests.h"
#include "config/config.h"
#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "scheduling/plugins/inflight_load_producer.h"

namespace sluice {
namespace {

using flowcontrol::DisplacementPolicy;
using flowcontrol::FairnessParams;
using flowcontrol::FairnessPolicy;
using flowcontrol::OrderingPolicy;
using flowcontrol::SaturationDetector;
using flowcontrol::UsageLimitPolicy;

constexpr ExtensionKind kBuildable[] = {ExtensionKind::kOrderingPolicy,
                                        ExtensionKind::kFairnessPolicy,
                                        ExtensionKind::kDisplacementPolicy,
                                        ExtensionKind::kSaturationDetector,
                                        ExtensionKind::kUsageLimitPolicy,
                                        ExtensionKind::kDataProducer,
                                        ExtensionKind::kFilter,
                                        ExtensionKind::kScorer,
                                        ExtensionKind::kPicker,
                                        ExtensionKind::kPdDecider,
                                        ExtensionKind::kProfileHandler,
                                        ExtensionKind::kAdmitter};

TEST(Extensions, EveryDeclaredTypeIsRegisteredWithItsKindAndNothingElse) {
  const auto& r = builtin_extensions();
  std::size_t buildable = 0;
  for (const auto& e : kBuiltinExtensionTypes) {
    auto kind = r.kind_of(e.type);
    if (e.kind == ExtensionKind::kBuiltIn) {
      EXPECT_FALSE(kind) << e.type;
      continue;
    }
    ++buildable;
    ASSERT_TRUE(kind) << e.type;
    EXPECT_EQ(*kind, e.kind) << e.type;
  }
  EXPECT_EQ(r.size(), buildable);
  std::size_t listed = 0;
  for (auto k : kBuildable) listed += r.types(k).size();
  EXPECT_EQ(listed, buildable);
}

// A small context for scheduling plugins that look for a producer.
class OneProducer final : public PluginContext {
 public:
  OneProducer() : producer_(scheduling::PrefixParams{}) {
    producer_.set_name(std::string(scheduling::ApproxPrefixCacheProducer::kType));
    load_.set_name(std::string(scheduling::InFlightLoadProducer::kType));
  }
  Plugin* find(std::string_view name) const override {
    if (name == load_.name()) return const_cast<scheduling::InFlightLoadProducer*>(&load_);
    return name == producer_.name() ? const_cast<scheduling::ApproxPrefixCacheProducer*>(&producer_)
                                    : nullptr;
  }
  std::vector<Plugin*> of_type(std::string_view type) const override {
    if (type == load_.type()) return {const_cast<scheduling::InFlightLoadProducer*>(&load_)};
    if (type != producer_.type()) return {};
    return {const_cast<scheduling::ApproxPrefixCacheProducer*>(&producer_)};
  }

 private:
  scheduling::ApproxPrefixCacheProducer producer_;
  // load (issue 40): the producer token-load-scorer and the affinity filter read.
  scheduling::InFlightLoadProducer load_{scheduling::InFlightLoadParams{}, &producer_};
};

TEST(Extensions, EachFactoryBuildsTheTypeItIsRegisteredAs) {
  const auto& r = builtin_extensions();
  for (const auto& t : r.types(ExtensionKind::kOrderingPolicy))
    EXPECT_EQ(r.build<OrderingPolicy>(t)->type(), t);
  for (const auto& t : r.types(ExtensionKind::kFairnessPolicy))
    EXPECT_EQ(r.build<FairnessPolicy>(t, FairnessParams{})->type(), t);
  for (const auto& t : r.types(ExtensionKind::kDisplacementPolicy))
    EXPECT_EQ(r.build<DisplacementPolicy>(t)->type(), t);
  for (const auto& t : r.types(ExtensionKind::kSaturationDetector)) {
    config::SaturationDetectorSpec spec;
    spec.type = t;
    EXPECT_EQ(r.build<SaturationDetector>(t, spec)->type(), t);
  }
  for (const auto& t : r.types(ExtensionKind::kUsageLimitPolicy)) {
    config::UsageLimitSpec spec;
    spec.type = t;
    spec.min_ceiling = 0.5;
    EXPECT_EQ(r.build<UsageLimitPolicy>(t, spec)->type(), t);
  }
  for (const auto& t : r.types(ExtensionKind::kAdmitter)) {
    PluginParams p(YAML::Node(), "test", "plugins[" + t + "].parameters", 1);
    EXPECT_EQ(r.build<flowcontrol::Admitter>(t, p)->type(), t);
  }
  // Scheduling plugins from minimal parameters (by-label needs a label).
  int built = 0;
  for (auto kind :
       {ExtensionKind::kDataProducer, ExtensionKind::kFilter, ExtensionKind::kScorer,
        ExtensionKind::kPicker, ExtensionKind::kPdDecider, ExtensionKind::kProfileHandler}) {
    for (const auto& t : r.types(kind)) {
      YAML::Node params = YAML::Load(t == "by-label" ? "{label: role, allowsNoLabel: true}" : "{}");
      PluginParams p(params, "test", "plugins[" + t + "].parameters", 1);
      OneProducer ctx;
      auto plugin = (*r.factory<Plugin>(t))(p, ctx);
      ASSERT_TRUE(plugin) << t;
      EXPECT_EQ(plugin->type(), t);
      ++built;
    }
  }
  EXPECT_GE(built, 15);
}

TEST(Extensions, TypedLookupRefusesAnotherInterfacesType) {
  const auto& r = builtin_extensions();
  EXPECT_EQ(r.build<OrderingPolicy>("vtc-fairness-policy"), nullptr);
  EXPECT_EQ(r.build<FairnessPolicy>("fcfs-ordering-policy", FairnessParams{}), nullptr);
  EXPECT_EQ(r.factory<Plugin>("concurrency-detector"), nullptr);
  EXPECT_EQ(r.factory<Plugin>("openai-parser"), nullptr);  // built in: nothing to build
  EXPECT_EQ(r.build<DisplacementPolicy>("none"), nullptr);
  EXPECT_EQ(r.build<OrderingPolicy>("no-such-policy"), nullptr);
}

TEST(Extensions, RegistrationMistakesAreRefused) {
  ExtensionRegistry r;
  auto fcfs = [] { return builtin_extensions().build<OrderingPolicy>("fcfs-ordering-policy"); };
  r.add<OrderingPolicy>(ExtensionKind::kOrderingPolicy, "mine", fcfs);
  EXPECT_THROW(r.add<OrderingPolicy>(ExtensionKind::kOrderingPolicy, "mine", fcfs),
               std::logic_error);
  EXPECT_THROW(r.add<OrderingPolicy>(ExtensionKind::kScorer, "other", fcfs), std::logic_error);
  EXPECT_THROW(r.add<OrderingPolicy>(ExtensionKind::kOrderingPolicy, "empty", {}),
               std::logic_error);
  EXPECT_EQ(r.types(ExtensionKind::kOrderingPolicy), std::vector<std::string>{"mine"});
}

std::string config_error(const std::string& yaml) {
  try {
    config::load_config_string(yaml, "x.yaml");
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Extensions, ConfigErrorsListTheRegistrysTypes) {
  const auto& r = builtin_extensions();
  auto listed_in = [&](const std::string& message, ExtensionKind kind) {
    for (const auto& t : r.types(kind))
      EXPECT_NE(message.find(t), std::string::npos) << t << " missing from: " << message;
  };
  std::string e = config_error(
      "flowControl:\n  priorityBands:\n  - priority: 1\n"
      "    fairnessPolicyRef: nope\n");
  EXPECT_NE(e.find("x.yaml:4"), std::string::npos) << e;
  listed_in(e, ExtensionKind::kFairnessPolicy);
  e = config_error(
      "flowControl:\n  priorityBands:\n  - priority: 1\n"
      "    orderingPolicyRef: nope\n");
  listed_in(e, ExtensionKind::kOrderingPolicy);
  e = config_error("flowControl:\n  usageLimitPolicyPluginRef: nope\n");
  listed_in(e, ExtensionKind::kUsageLimitPolicy);
  e = config_error("saturationDetector:\n  pluginRef: nope\n");
  listed_in(e, ExtensionKind::kSaturationDetector);
  e = config_error("flowControl:\n  displacementPolicy: nope\n");
  listed_in(e, ExtensionKind::kDisplacementPolicy);
  // Every type that may be declared under plugins: is accepted there and
  // named when a type is unknown.
  e = config_error("plugins:\n- type: nope\n");
  EXPECT_NE(e.find("x.yaml:2"), std::string::npos) << e;
  for (const auto& t : kBuiltinExtensionTypes) {
    EXPECT_EQ(config::is_known_plugin_type(std::string(t.type)), t.declarable) << t.type;
    if (t.declarable) {
      EXPECT_NE(e.find(t.type), std::string::npos) << t.type;
    }
  }
}

TEST(Extensions, AdminBandErrorsListTheRegistrysTypes) {
  registry::BandConfig c;
  admin::AdminReply error;
  ASSERT_FALSE(admin::parse_band(R"({"fairnessPolicy":"nope"})", c, error));
  for (const auto& t : builtin_extensions().types(ExtensionKind::kFairnessPolicy))
    EXPECT_NE(error.body.find(t), std::string::npos) << t;
  ASSERT_FALSE(admin::parse_band(R"({"orderingPolicy":"vtc-fairness-policy"})", c, error));
  for (const auto& t : builtin_extensions().types(ExtensionKind::kOrderingPolicy))
    EXPECT_NE(error.body.find(t), std::string::npos) << t;
  ASSERT_TRUE(admin::parse_band(
      R"({"fairnessPolicy":"vtc-fairness-policy","orderingPolicy":"edf-ordering-policy"})", c,
      error));
  EXPECT_EQ(c.fairness, "vtc-fairness-policy");
  EXPECT_EQ(c.ordering, "edf-ordering-policy");
}

}  // namespace
}  // namespace sluice

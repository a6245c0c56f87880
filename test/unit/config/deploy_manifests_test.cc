// deploy/kubernetes/ checked offline, as far as can be done without a
// cluster: every manifest parses and names its kind; kustomization lists
// every file; selectors match the pods they are for; probes, ports, volumes
// and secrets refer to things that exist; the ConfigMap's sluice config
// loads with this build's parser, and its DNS and Redis names are the
// Services' own.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"

namespace sluice::config {
namespace {

namespace fs = std::filesystem;

const std::string kDir = SLUICE_DEPLOY_DIR;

struct Manifests {
  std::map<std::string, std::vector<YAML::Node>> by_kind;
  std::vector<std::string> files;
  YAML::Node kustomization;
  const YAML::Node* find(const std::string& kind, const std::string& name) const {
    auto it = by_kind.find(kind);
    if (it == by_kind.end()) return nullptr;
    for (const auto& n : it->second)
      if (n["metadata"]["name"].as<std::string>() == name) return &n;
    return nullptr;
  }
};

Manifests load() {
  Manifests m;
  for (const auto& e : fs::directory_iterator(kDir)) {
    if (e.path().extension() != ".yaml") continue;
    const std::string file = e.path().filename().string();
    if (file == "kustomization.yaml") {
      m.kustomization = YAML::LoadFile(e.path().string());
      continue;
    }
    m.files.push_back(file);
    for (const auto& doc : YAML::LoadAllFromFile(e.path().string())) {
      EXPECT_TRUE(doc["apiVersion"] && doc["kind"] && doc["metadata"]["name"]) << file;
      m.by_kind[doc["kind"].as<std::string>()].push_back(doc);
    }
  }
  return m;
}

// `selector` (matchLabels or a Service's selector) picks pods labelled `labels`.
bool selects(const YAML::Node& selector, const YAML::Node& labels) {
  if (!selector || !selector.IsMap() || selector.size() == 0) return false;
  for (const auto& kv : selector)
    if (!labels[kv.first.as<std::string>()] ||
        labels[kv.first.as<std::string>()].as<std::string>() != kv.second.as<std::string>())
      return false;
  return true;
}

const YAML::Node* deployment_for(const Manifests& m, const YAML::Node& selector) {
  for (const auto& d : m.by_kind.at("Deployment"))
    if (selects(selector, d["spec"]["template"]["metadata"]["labels"])) return &d;
  return nullptr;
}

bool has_port(const YAML::Node& deployment, const YAML::Node& port) {
  for (const auto& c : deployment["spec"]["template"]["spec"]["containers"])
    for (const auto& p : c["ports"])
      if ((port.IsScalar() && p["name"] && p["name"].as<std::string>() == port.as<std::string>()) ||
          p["containerPort"].as<std::string>() == port.as<std::string>())
        return true;
  return false;
}

TEST(DeployManifests, EveryFileParsesAndKustomizationListsThemAll) {
  ASSERT_TRUE(fs::exists(kDir)) << kDir << " is part of the repository";
  const Manifests m = load();
  ASSERT_TRUE(m.kustomization) << "kustomization.yaml";
  std::set<std::string> listed;
  for (const auto& r : m.kustomization["resources"]) listed.insert(r.as<std::string>());
  EXPECT_EQ(listed, std::set<std::string>(m.files.begin(), m.files.end()));
  for (const char* kind :
       {"Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget", "Namespace"})
    EXPECT_TRUE(m.by_kind.count(kind)) << "no " << kind;
}

TEST(DeployManifests, WorkloadsServicesAndBudgetFitTogether) {
  ASSERT_TRUE(fs::exists(kDir)) << kDir << " is part of the repository";
  const Manifests m = load();
  const YAML::Node* sluice = m.find("Deployment", "sluice");
  ASSERT_TRUE(sluice);
  const auto& spec = (*sluice)["spec"];
  EXPECT_EQ(spec["replicas"].as<int>(), 3);
  EXPECT_TRUE(selects(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"]));
  for (const auto& d : m.by_kind.at("Deployment")) {
    const std::string name = d["metadata"]["name"].as<std::string>();
    std::set<std::string> volumes;
    for (const auto& v : d["spec"]["template"]["spec"]["volumes"])
      volumes.insert(v["name"].as<std::string>());
    for (const auto& c : d["spec"]["template"]["spec"]["containers"]) {
      EXPECT_FALSE(c["image"].as<std::string>().empty()) << name;
      EXPECT_TRUE(c["resources"]["requests"]["cpu"] && c["resources"]["requests"]["memory"])
          << name << ": resource requests";
      EXPECT_TRUE(c["livenessProbe"] && c["readinessProbe"]) << name << ": probes";
      for (const auto& vm : c["volumeMounts"])
        EXPECT_TRUE(volumes.count(vm["name"].as<std::string>())) << name << ": volume";
    }
  }
  // sluice's probes are the admin plane's.
  const auto& c = spec["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_TRUE(has_port(*sluice, c["readinessProbe"]["httpGet"]["port"]));
  // Each Service selects a Deployment's pods on ports they have, except the
  // headless model-server one (its pods are the user's).
  for (const auto& s : m.by_kind.at("Service")) {
    const std::string name = s["metadata"]["name"].as<std::string>();
    if (s["spec"]["clusterIP"] && s["spec"]["clusterIP"].as<std::string>() == "None") continue;
    const YAML::Node* d = deployment_for(m, s["spec"]["selector"]);
    ASSERT_TRUE(d) << "service " << name << " selects no deployment";
    for (const auto& p : s["spec"]["ports"])
      EXPECT_TRUE(has_port(*d, p["targetPort"])) << "service " << name;
  }
  const YAML::Node* pdb = m.find("PodDisruptionBudget", "sluice");
  ASSERT_TRUE(pdb);
  EXPECT_TRUE(
      selects((*pdb)["spec"]["selector"]["matchLabels"], spec["template"]["metadata"]["labels"]));
  EXPECT_LT((*pdb)["spec"]["minAvailable"].as<int>(), spec["replicas"].as<int>())
      << "a budget that allows no disruption blocks node drains";
  // Secrets mounted are keys the Secret has.
  const YAML::Node* secret = m.find("Secret", "sluice-secrets");
  ASSERT_TRUE(secret);
  for (const auto& v : spec["template"]["spec"]["volumes"]) {
    if (!v["secret"]) continue;
    for (const auto& item : v["secret"]["items"]) {
      EXPECT_TRUE((*secret)["stringData"][item["key"].as<std::string>()])
          << item["key"].as<std::string>();
    }
  }
}

TEST(DeployManifests, TheConfigMapsConfigLoadsAndNamesTheServices) {
  ASSERT_TRUE(fs::exists(kDir)) << kDir << " is part of the repository";
  const Manifests m = load();
  const YAML::Node* cm = m.find("ConfigMap", "sluice-config");
  ASSERT_TRUE(cm);
  std::string text = (*cm)["data"]["config.yaml"].as<std::string>();
  // The password file is the Secret's, mounted in the pod: here a stand-in.
  const std::string mounted = "/etc/sluice/secrets/redis-password";
  const auto at = text.find(mounted);
  ASSERT_NE(at, std::string::npos);
  char tmpl[] = "/tmp/sluice-deploy-pw-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "pw\n", 3), 3);
  close(fd);
  text.replace(at, mounted.size(), tmpl);
  Config c;
  try {
    c = load_config_string(text, "configmap.yaml");
  } catch (const ConfigError& e) {
    std::remove(tmpl);
    FAIL() << e.what();
  }
  std::remove(tmpl);
  EXPECT_TRUE(c.redis.enabled);
  EXPECT_TRUE(c.flow_control.enabled);
  const std::string ns = m.kustomization["namespace"].as<std::string>();
  // Redis: the Service's name in the namespace, on its port.
  const YAML::Node* redis = m.find("Service", "sluice-redis");
  ASSERT_TRUE(redis);
  EXPECT_EQ(c.redis.host, "sluice-redis." + ns + ".svc.cluster.local");
  EXPECT_EQ(c.redis.port, (*redis)["spec"]["ports"][0]["port"].as<int>());
  // The pool: the headless Service's name and port.
  ASSERT_EQ(c.dns_endpoints.size(), 1u);
  const YAML::Node* models = m.find("Service", "vllm-headless");
  ASSERT_TRUE(models);
  EXPECT_EQ((*models)["spec"]["clusterIP"].as<std::string>(), "None");
  EXPECT_EQ(c.dns_endpoints[0].host, "vllm-headless." + ns + ".svc.cluster.local");
  EXPECT_EQ(c.dns_endpoints[0].port, (*models)["spec"]["ports"][0]["port"].as<int>());
  // The listeners are the container's ports, the admin one not on loopback
  // (probes come from the kubelet) — which is why the token file is given.
  const YAML::Node* sluice = m.find("Deployment", "sluice");
  ASSERT_TRUE(sluice);
  const auto& container = (*sluice)["spec"]["template"]["spec"]["containers"][0];
  std::set<std::string> ports;
  for (const auto& p : container["ports"]) ports.insert(p["containerPort"].as<std::string>());
  EXPECT_TRUE(ports.count(c.server.listen.substr(c.server.listen.rfind(':') + 1)));
  EXPECT_TRUE(ports.count(c.server.admin_listen.substr(c.server.admin_listen.rfind(':') + 1)));
  bool token = false;
  for (const auto& a : container["args"])
    token = token || a.as<std::string>() == "--admin-token-file";
  EXPECT_TRUE(token);
}

}  // namespace
}  // namespace sluice::config

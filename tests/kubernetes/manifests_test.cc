// deploy/kubernetes/*.yaml as a cluster would take them (ctest -L
// kubernetes): every file parses (several documents each), holds a
// ConfigMap, a Deployment, a Service and a PodDisruptionBudget that select
// the same pods, and the Deployment runs the config its ConfigMap holds:
// the config folder is rebuilt from the Deployment's volume (ConfigMap items
// and, for the Secrets, a placeholder per key) and passes `sluice validate`;
// the probes ask /healthz and /readyz on the config's admin port; the ports
// are ones the config listens on; the image is the one `make image` tags;
// the pod is non-root on a read-only root; and the grace period outlasts the
// drain.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command.h"
#include "policy/config_loader.h"
#include "sluice_process.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

const fs::path kManifests = fs::path(SLUICE_SOURCE_DIR) / "deploy/kubernetes";
// The name `make image` gives the image (Makefile, packaging/container).
const std::string kImage = std::string("sluice:") + SLUICE_VERSION;
// Where the image's default command reads its config.
const std::string kImageConfig = "/etc/sluice/sluice.yaml";
// What a Secret key stands for when the config folder is rebuilt.
const std::map<std::string, std::string> kSecretPlaceholders = {
    {"url", "redis://:placeholder@127.0.0.1:6379/0\n"}};

std::vector<fs::path> manifest_files() {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(kManifests)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The manifests of one file, by kind (each kind once).
struct Manifests {
  std::map<std::string, YAML::Node> by_kind;
  const YAML::Node& operator[](const std::string& kind) const { return by_kind.at(kind); }
};

Manifests load(const fs::path& file) {
  Manifests m;
  const std::vector<YAML::Node> docs = YAML::LoadAllFromFile(file.string());
  for (const YAML::Node& doc : docs) {
    if (doc.IsNull()) continue;
    EXPECT_TRUE(doc.IsMap()) << file;
    EXPECT_TRUE(doc["apiVersion"].IsScalar()) << file;
    EXPECT_TRUE(doc["metadata"]["name"].IsScalar()) << file;
    const std::string kind = doc["kind"].as<std::string>();
    EXPECT_EQ(m.by_kind.count(kind), 0u) << file << ": a second " << kind;
    m.by_kind[kind] = doc;
  }
  return m;
}

using Labels = std::map<std::string, std::string>;

Labels labels_of(const YAML::Node& node) {
  return node.IsMap() ? node.as<Labels>() : Labels{};
}

// True when every label of `selector` is in `labels`.
bool selects(const Labels& selector, const Labels& labels) {
  if (selector.empty()) return false;
  return std::all_of(selector.begin(), selector.end(), [&](const auto& kv) {
    const auto it = labels.find(kv.first);
    return it != labels.end() && it->second == kv.second;
  });
}

const YAML::Node sluice_container(const YAML::Node& deployment) {
  for (const YAML::Node& c : deployment["spec"]["template"]["spec"]["containers"]) {
    if (c["name"].as<std::string>() == "sluice") return c;
  }
  ADD_FAILURE() << "no container named sluice";
  return YAML::Node();
}

// A container port by name ("admin") or number: its number, or 0.
int container_port(const YAML::Node& container, const YAML::Node& port) {
  const std::string text = port.as<std::string>();
  for (const YAML::Node& p : container["ports"]) {
    const int number = p["containerPort"].as<int>();
    if (p["name"] && p["name"].as<std::string>() == text) return number;
    if (std::to_string(number) == text) return number;
  }
  return 0;
}

// The config folder as the pod sees it, rebuilt under `root`: each mounted
// volume's ConfigMap items with their data and Secret items with their
// placeholder, at mountPath/path under `root`.
void rebuild_mounts(const Manifests& m, const YAML::Node& container, const fs::path& root) {
  const YAML::Node volumes = m["Deployment"]["spec"]["template"]["spec"]["volumes"];
  const std::string config_map = m["ConfigMap"]["metadata"]["name"].as<std::string>();
  const YAML::Node data = m["ConfigMap"]["data"];
  for (const YAML::Node& mount : container["volumeMounts"]) {
    const std::string name = mount["name"].as<std::string>();
    const fs::path at = root / mount["mountPath"].as<std::string>().substr(1);
    for (const YAML::Node& volume : volumes) {
      if (volume["name"].as<std::string>() != name) continue;
      std::vector<YAML::Node> sources;
      if (volume["projected"]) {
        for (const YAML::Node& s : volume["projected"]["sources"]) sources.push_back(s);
      } else {
        sources.push_back(volume);
      }
      for (const YAML::Node& source : sources) {
        const bool is_map = static_cast<bool>(source["configMap"]);
        const YAML::Node ref = is_map ? source["configMap"] : source["secret"];
        ASSERT_TRUE(ref) << "volume " << name << ": only ConfigMaps and Secrets are known here";
        if (is_map) {
          ASSERT_EQ(ref["name"].as<std::string>(), config_map);
        }
        for (const YAML::Node& item : ref["items"]) {
          const std::string key = item["key"].as<std::string>();
          std::string content;
          if (is_map) {
            ASSERT_TRUE(data[key]) << "ConfigMap " << config_map << " has no key " << key;
            content = data[key].as<std::string>();
          } else {
            ASSERT_EQ(kSecretPlaceholders.count(key), 1u)
                << "no placeholder for Secret key " << key;
            content = kSecretPlaceholders.at(key);
          }
          const fs::path file = at / item["path"].as<std::string>();
          fs::create_directories(file.parent_path());
          std::ofstream(file, std::ios::binary) << content;
        }
      }
    }
  }
}

// Where the container's command reads its config.
std::string config_path_of(const YAML::Node& container) {
  const YAML::Node args = container["args"];
  if (!args) return kImageConfig;
  const std::vector<std::string> list = args.as<std::vector<std::string>>();
  const auto it = std::find(list.begin(), list.end(), "--config");
  EXPECT_TRUE(it != list.end() && it + 1 != list.end()) << "args name no --config";
  return it != list.end() && it + 1 != list.end() ? *(it + 1) : "";
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

class Manifest : public testing::TestWithParam<fs::path> {};

TEST_P(Manifest, IsADeploymentOfTheConfigItHolds) {
  const Manifests m = load(GetParam());
  std::set<std::string> kinds;
  for (const auto& [kind, doc] : m.by_kind) kinds.insert(kind);
  ASSERT_EQ(kinds,
            (std::set<std::string>{"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}));

  // One set of pods: the Deployment's, selected by the Service and the budget.
  const YAML::Node deployment = m["Deployment"];
  const Labels pod_labels = labels_of(deployment["spec"]["template"]["metadata"]["labels"]);
  EXPECT_TRUE(selects(labels_of(deployment["spec"]["selector"]["matchLabels"]), pod_labels));
  EXPECT_TRUE(selects(labels_of(m["Service"]["spec"]["selector"]), pod_labels));
  EXPECT_TRUE(
      selects(labels_of(m["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"]), pod_labels));

  const YAML::Node pod = deployment["spec"]["template"]["spec"];
  const YAML::Node container = sluice_container(deployment);
  ASSERT_TRUE(container);
  EXPECT_EQ(container["image"].as<std::string>(), kImage);
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(pod["securityContext"]["runAsUser"].as<int>(), 65532);  // the image's user
  EXPECT_TRUE(container["securityContext"]["readOnlyRootFilesystem"].as<bool>());
  EXPECT_FALSE(container["securityContext"]["allowPrivilegeEscalation"].as<bool>());

  // The config the pod runs: valid, as `sluice serve` will load it.
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  rebuild_mounts(m, container, dir);
  const std::string config_path = config_path_of(container);
  ASSERT_EQ(config_path.front(), '/');
  const std::string config_file = dir + config_path;
  const CommandResult validate = run_command({SLUICE_BINARY, "validate", "--config", config_file});
  EXPECT_EQ(validate.exit_code, 0) << validate.output;
  const policy::LoadResult loaded = policy::load_config_file(config_file);
  fs::remove_all(dir);
  ASSERT_TRUE(loaded.config.has_value());
  const policy::Config& config = *loaded.config;

  // Probes: the admin port, reachable on the pod IP, and the paths it serves.
  EXPECT_FALSE(is_loopback(config.admin.host))
      << "the kubelet cannot reach " << config.admin.text();
  const std::vector<std::pair<const char*, const char*>> probes = {{"livenessProbe", "/healthz"},
                                                                   {"readinessProbe", "/readyz"}};
  for (const auto& [probe, path] : probes) {
    const YAML::Node get = container[probe]["httpGet"];
    ASSERT_TRUE(get) << probe;
    EXPECT_EQ(get["path"].as<std::string>(), path) << probe;
    EXPECT_EQ(container_port(container, get["port"]), config.admin.port) << probe;
  }

  // Every port the Service sends to is one the config serves on an address
  // other pods reach: listen, or grpc.
  std::set<int> served;
  if (!is_loopback(config.listen.host)) served.insert(config.listen.port);
  if (config.grpc && !is_loopback(config.grpc->host)) served.insert(config.grpc->port);
  for (const YAML::Node& port : m["Service"]["spec"]["ports"]) {
    const int target = container_port(container, port["targetPort"]);
    EXPECT_EQ(served.count(target), 1u) << "Service port " << port["port"].as<int>();
  }

  // SIGTERM comes after preStop; the drain then takes up to shutdown_grace.
  int pre_stop = 0;
  if (const YAML::Node sleep = container["lifecycle"]["preStop"]["sleep"]) {
    pre_stop = sleep["seconds"].as<int>();
  }
  const auto drain = std::chrono::ceil<std::chrono::seconds>(config.server.shutdown_grace);
  EXPECT_GT(pod["terminationGracePeriodSeconds"].as<int>(), pre_stop + drain.count());
}

INSTANTIATE_TEST_SUITE_P(Kubernetes, Manifest, testing::ValuesIn(manifest_files()),
                         [](const testing::TestParamInfo<fs::path>& info) {
                           std::string name = info.param.stem().string();
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Kubernetes, BothShapesAreThere) {
  std::vector<std::string> names;
  for (const fs::path& file : manifest_files()) names.push_back(file.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"envoy-rls.yaml", "gateway.yaml"}));
}

}  // namespace
}  // namespace sluice::test

// The container image as an operator runs it (ctest -L container):
// container_image built it with packaging/container/build-image.sh (what
// `make image` runs) from this build tree's binary, tagged SLUICE_TEST_IMAGE.
// Each test starts it with podman, its ports mapped to free ports of
// 127.0.0.1, and removes it at the end. CONTAINERS_CONF names
// tests/container/containers.conf (runc, no default rlimits).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "command.h"
#include "http_client.h"
#include "sluice_process.h"

#ifndef SLUICE_TEST_IMAGE
#error "SLUICE_TEST_IMAGE must name the image container_image builds"
#endif

namespace sluice::test {
namespace {

const std::string kImage = SLUICE_TEST_IMAGE;
const std::string kPodman = SLUICE_PODMAN;
const std::string kCheck = R"({"policy":"per-client","key":"user:42"})";
using Headers = std::vector<std::pair<std::string, std::string>>;
const Headers kJson = {{"Content-Type", "application/json"}};
// Starting a container and the (sanitized) server in it: seconds, not minutes.
constexpr std::chrono::seconds kStartBound{90};

CommandResult podman(std::vector<std::string> args,
                     std::chrono::seconds timeout = std::chrono::seconds(120)) {
  args.insert(args.begin(), kPodman);
  return run_command(args, timeout);
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// A container of the image, started detached, with its ports 8080 and 9090
// published on free ports of 127.0.0.1; removed when destroyed.
class Container {
 public:
  // `options` go before the image (mounts, --read-only), `args` after it
  // (in place of the image's CMD). Fails the test and returns null when the
  // container does not start.
  static std::unique_ptr<Container> run(const std::vector<std::string>& options,
                                        const std::vector<std::string>& args = {}) {
    static int count = 0;
    auto c = std::unique_ptr<Container>(new Container);
    c->name_ = "sluice-test-" + std::to_string(::getpid()) + "-" + std::to_string(++count);
    // The sanitizers' options reach the server in the container too.
    std::vector<std::string> command = {
        "run",       "--detach",        "--name", c->name_,       "--publish", "127.0.0.1::8080",
        "--publish", "127.0.0.1::9090", "--env",  "ASAN_OPTIONS", "--env",     "UBSAN_OPTIONS"};
    command.insert(command.end(), options.begin(), options.end());
    command.push_back(kImage);
    command.insert(command.end(), args.begin(), args.end());
    const CommandResult started = podman(command);
    if (started.exit_code != 0) {
      ADD_FAILURE() << "podman run failed: " << started.output;
      return nullptr;
    }
    c->port_ = c->host_port("8080");
    c->admin_port_ = c->host_port("9090");
    if (c->port_ == 0 || c->admin_port_ == 0) return nullptr;
    return c;
  }

  ~Container() { podman({"rm", "--force", "--time", "0", name_}); }

  uint16_t port() const { return port_; }
  uint16_t admin_port() const { return admin_port_; }

  // Waits until /healthz answers 200 through the mapping; false (and a test
  // failure with the container's log) if it never does.
  bool wait_healthy() const {
    const auto deadline = std::chrono::steady_clock::now() + kStartBound;
    while (std::chrono::steady_clock::now() < deadline) {
      if (HttpConnection::can_connect("127.0.0.1", admin_port_) &&
          http_request("127.0.0.1", admin_port_, "GET", "/healthz").status == 200) {
        return true;
      }
      if (!running()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << name_ << " never answered /healthz; its log:\n" << logs();
    return false;
  }

  bool running() const {
    return trimmed(podman({"inspect", "--format", "{{.State.Running}}", name_}).output) == "true";
  }

  std::string logs() const { return podman({"logs", name_}).output; }

  // SIGTERM to the server (the container's process 1), then its exit code
  // once it has exited; nullopt if it is still running after `bound`.
  std::optional<int> terminate(std::chrono::seconds bound) const {
    const CommandResult killed = podman({"kill", "--signal", "TERM", name_});
    EXPECT_EQ(killed.exit_code, 0) << killed.output;
    const CommandResult waited = podman({"wait", name_}, bound);
    if (waited.exit_code != 0) return std::nullopt;
    return std::stoi(trimmed(waited.output));
  }

 private:
  Container() = default;

  // "127.0.0.1:41234" from `podman port NAME 8080/tcp`.
  uint16_t host_port(const std::string& container_port) const {
    const CommandResult r = podman({"port", name_, container_port + "/tcp"});
    const std::string text = trimmed(r.output);
    const size_t colon = text.rfind(':');
    if (r.exit_code != 0 || text.rfind("127.0.0.1:", 0) != 0 || colon == std::string::npos) {
      ADD_FAILURE() << "podman port " << name_ << " " << container_port << ": " << r.output;
      return 0;
    }
    return static_cast<uint16_t>(std::stoi(text.substr(colon + 1)));
  }

  std::string name_;
  uint16_t port_ = 0;
  uint16_t admin_port_ = 0;
};

// A config file for the container to mount (the folder is the test's; the
// file is readable by the image's user unless `mode` says otherwise).
class MountedFile {
 public:
  MountedFile(const std::string& content, mode_t mode = 0644) : dir_(make_temp_dir()) {
    path_ = dir_ + "/sluice.yaml";
    std::ofstream(path_, std::ios::binary) << content;
    ::chmod(path_.c_str(), mode);
  }
  ~MountedFile() { remove_dir(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The image's file system: a container made from it, exported to a tar
// file (`podman export`), read with tar.
class ExportedImage {
 public:
  ExportedImage() : dir_(make_temp_dir()), tar_(dir_ + "/image.tar") {
    const std::string name = "sluice-test-export-" + std::to_string(::getpid());
    const CommandResult created = podman({"create", "--name", name, kImage});
    EXPECT_EQ(created.exit_code, 0) << created.output;
    const CommandResult exported = podman({"export", "--output", tar_, name});
    EXPECT_EQ(exported.exit_code, 0) << exported.output;
    podman({"rm", "--force", name});
  }
  ~ExportedImage() { remove_dir(dir_); }

  // Its files and symlinks ("usr/bin/sluice", ...).
  std::set<std::string> files() const {
    const CommandResult listed = run_command({"/usr/bin/tar", "--list", "--file", tar_});
    EXPECT_EQ(listed.exit_code, 0) << listed.output;
    std::set<std::string> files;
    std::istringstream lines(listed.output);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("./", 0) == 0) line.erase(0, 2);
      if (!line.empty() && line.back() != '/') files.insert(line);
    }
    return files;
  }

  std::string content(const std::string& file) const {
    return run_command({"/usr/bin/tar", "--extract", "--to-stdout", "--file", tar_, file}).output;
  }

 private:
  std::string dir_;
  std::string tar_;
};

// The shared libraries and loader `ldd` names for the binary the image was
// built from, without their leading '/'.
std::vector<std::string> libraries_of_the_binary() {
  const CommandResult r = run_command({"/usr/bin/ldd", SLUICE_BINARY});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> libraries;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string first, arrow, path;
    words >> first >> arrow >> path;
    if (arrow == "=>" && path.rfind('/', 0) == 0) libraries.push_back(path.substr(1));
    if (first.rfind('/', 0) == 0) libraries.push_back(first.substr(1));
  }
  return libraries;
}

TEST(ContainerImage, HoldsTheBinaryItsLibrariesAndCertificatesAndNoShell) {
  const ExportedImage image;
  const std::set<std::string> files = image.files();
  for (const char* file :
       {"usr/bin/sluice", "etc/sluice/sluice.yaml", "etc/passwd", "etc/group", "etc/nsswitch.conf",
        "etc/ssl/certs/ca-certificates.crt", "usr/lib/ssl/cert.pem"}) {
    EXPECT_EQ(files.count(file), 1u) << file;
  }
  const std::vector<std::string> libraries = libraries_of_the_binary();
  EXPECT_FALSE(libraries.empty());
  for (const std::string& library : libraries) EXPECT_EQ(files.count(library), 1u) << library;
  // The binary is the only program: no shell, no package manager.
  for (const std::string& file : files) {
    for (const char* folder : {"bin/", "sbin/", "usr/bin/", "usr/sbin/", "usr/local/"}) {
      if (file.rfind(folder, 0) == 0) {
        EXPECT_EQ(file, "usr/bin/sluice");
      }
    }
  }
  EXPECT_EQ(image.content("etc/sluice/sluice.yaml"),
            read_file(SLUICE_SOURCE_DIR "/packaging/container/sluice.yaml"));
  EXPECT_EQ(image.content("usr/share/sluice/grafana/sluice.json"),
            read_file(SLUICE_SOURCE_DIR "/deploy/grafana/sluice.json"));
  EXPECT_EQ(image.content("usr/share/sluice/prometheus/alerts.yaml"),
            read_file(SLUICE_SOURCE_DIR "/deploy/prometheus/alerts.yaml"));
  EXPECT_EQ(image.content("etc/ssl/certs/ca-certificates.crt"),
            read_file("/etc/ssl/certs/ca-certificates.crt"));
  EXPECT_NE(image.content("etc/passwd").find("sluice:x:65532:65532:"), std::string::npos);

  const CommandResult config =
      podman({"image", "inspect", "--format",
              "{{.Config.User}} {{json .Config.Entrypoint}} {{json .Config.Cmd}}", kImage});
  EXPECT_EQ(trimmed(config.output),
            R"(65532:65532 ["sluice"] ["serve","--config","/etc/sluice/sluice.yaml"])");
}

// `podman run -p 8080:8080 -p 9090:9090 sluice`: a decision service, probes
// from the host, and nothing on the admin port that changes state.
TEST(ContainerImage, ServesDecisionsAndProbesWithNothingMounted) {
  const std::unique_ptr<Container> c = Container::run({});
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->wait_healthy());
  // The requests carry "Host: 127.0.0.1": not the address the server sees
  // them arrive on behind the port mapping.
  const HttpResponse health = http_request("127.0.0.1", c->admin_port(), "GET", "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  const HttpResponse ready = http_request("127.0.0.1", c->admin_port(), "GET", "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ready\n");

  const HttpResponse check =
      http_request("127.0.0.1", c->port(), "POST", "/v1/check", kJson, kCheck);
  EXPECT_EQ(check.status, 200);
  EXPECT_EQ(
      check.body,
      R"({"allowed":true,"limit":100,"remaining":99,"reset_after_ms":20,"retry_after_ms":0})");

  for (const std::string target : {"/admin/reload", "/admin/reset"}) {
    const HttpResponse r = http_request("127.0.0.1", c->admin_port(), "POST", target, kJson,
                                        R"({"policy":"per-client","key":"user:42"})");
    EXPECT_EQ(r.status, 403) << target;
    EXPECT_EQ(r.body, R"({"error":{"code":"FORBIDDEN","message":"this admin port is read-only )"
                      R"((admin_read_only: true): a POST changes state and is not served"}})");
  }
  const HttpResponse metrics = http_request("127.0.0.1", c->admin_port(), "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find(R"(sluice_config_reloads_total{result="success"} 0)"),
            std::string::npos)
      << metrics.body;
}

TEST(ContainerImage, UsesTheConfigMountedAtEtcSluice) {
  const MountedFile config(R"(listen: 0.0.0.0:8080
admin: 0.0.0.0:9090
admin_read_only: true
policies:
  mounted: {capacity: 3, refill_rate: 1/h}
)");
  const std::unique_ptr<Container> c =
      Container::run({"--volume", config.path() + ":/etc/sluice/sluice.yaml:ro"});
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->wait_healthy());
  const HttpResponse r = http_request("127.0.0.1", c->port(), "POST", "/v1/check", kJson,
                                      R"({"policy":"mounted","key":"k"})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(
      r.body,
      R"({"allowed":true,"limit":3,"remaining":2,"reset_after_ms":3600000,"retry_after_ms":0})");
  // The image's own policy is not there.
  EXPECT_EQ(http_request("127.0.0.1", c->port(), "POST", "/v1/check", kJson, kCheck).status, 404);
}

// Nothing is written to the image's file system: it may be read-only (and
// podman's own tmpfs on /tmp and /run are turned off to show it).
TEST(ContainerImage, RunsOnAReadOnlyRootFileSystem) {
  const std::unique_ptr<Container> c = Container::run({"--read-only", "--read-only-tmpfs=false"});
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->wait_healthy());
  EXPECT_EQ(http_request("127.0.0.1", c->admin_port(), "GET", "/readyz").status, 200);
  EXPECT_EQ(http_request("127.0.0.1", c->port(), "POST", "/v1/check", kJson, kCheck).status, 200);
  EXPECT_EQ(c->terminate(std::chrono::seconds(60)), 0) << c->logs();
}

TEST(ContainerImage, SigtermDrainsAndExitsZero) {
  const std::unique_ptr<Container> c = Container::run({});
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->wait_healthy());
  // A keep-alive connection open at the signal: drained, not cut.
  HttpConnection open("127.0.0.1", c->port());
  EXPECT_EQ(open.request("POST", "/v1/check", kJson, kCheck).status, 200);
  // server.shutdown_grace is 5 s in the image's config: the bound is far above it.
  EXPECT_EQ(c->terminate(std::chrono::seconds(60)), 0) << c->logs();
  const std::string log = c->logs();
  EXPECT_NE(log.find("SIGTERM: no longer accepting"), std::string::npos) << log;
  EXPECT_NE(log.find("all connections drained"), std::string::npos) << log;
}

TEST(ContainerImage, AMissingOrUnreadableConfigIsAnErrorNamingThePath) {
  const CommandResult missing =
      podman({"run", "--rm", kImage, "serve", "--config", "/etc/sluice/missing.yaml"});
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("/etc/sluice/missing.yaml: cannot open the config file: No such "
                                "file or directory"),
            std::string::npos)
      << missing.output;

  // Mounted, but readable by root only: the image's user cannot read it.
  const MountedFile config("listen: 0.0.0.0:8080\n", 0600);
  const CommandResult unreadable =
      podman({"run", "--rm", "--volume", config.path() + ":/etc/sluice/sluice.yaml:ro", kImage});
  EXPECT_EQ(unreadable.exit_code, 1) << unreadable.output;
  EXPECT_NE(unreadable.output.find(
                "/etc/sluice/sluice.yaml: cannot open the config file: Permission denied"),
            std::string::npos)
      << unreadable.output;
}

}  // namespace
}  // namespace sluice::test

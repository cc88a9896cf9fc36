// The .deb as an operator gets it (ctest -L package): package_build made it
// from this build tree with cpack and unpacked it into SLUICE_PACKAGE_DIR
// (root/: its files, control/: its control files). These tests check what it
// holds, then run the unpacked binary on the unpacked config.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command.h"
#include "sluice_process.h"

#ifndef SLUICE_PACKAGE_DIR
#error "SLUICE_PACKAGE_DIR must name the folder package_build unpacks the .deb into"
#endif

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

const fs::path kPackage = SLUICE_PACKAGE_DIR;
const fs::path kRoot = kPackage / "root";
const fs::path kControl = kPackage / "control";
const fs::path kSource = SLUICE_SOURCE_DIR;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every file and symlink under `dir`, as paths relative to it.
std::set<std::string> files_under(const fs::path& dir) {
  std::set<std::string> files;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_directory()) files.insert(fs::relative(e.path(), dir).string());
  }
  return files;
}

fs::perms permissions(const fs::path& path) {
  return fs::status(path).permissions();
}

constexpr fs::perms kExecutable = fs::perms(0755);
constexpr fs::perms kReadable = fs::perms(0644);

// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  }
  return found;
}

TEST(Package, HoldsTheBinaryTheUnitTheConfigTheDocsAndTheMonitoringFiles) {
  std::set<std::string> expected = {
      "usr/bin/sluice",
      "lib/systemd/system/sluice.service",
      "etc/sluice/sluice.yaml",
      "usr/share/doc/sluice/README.md",
      "usr/share/sluice/grafana/sluice.json",
      "usr/share/sluice/prometheus/alerts.yaml",
  };
  for (const fs::directory_entry& e : fs::directory_iterator(kSource / "docs")) {
    if (e.path().extension() == ".md") {
      expected.insert("usr/share/doc/sluice/" + e.path().filename().string());
    }
  }
  // Nothing else: no headers, no static libraries, no CMake or pkg-config files.
  EXPECT_EQ(files_under(kRoot), expected);

  EXPECT_EQ(permissions(kRoot / "usr/bin/sluice"), kExecutable);
  EXPECT_EQ(permissions(kRoot / "etc/sluice/sluice.yaml"), kReadable);
  EXPECT_EQ(permissions(kRoot / "lib/systemd/system/sluice.service"), kReadable);
  EXPECT_EQ(read_file(kRoot / "etc/sluice/sluice.yaml"),
            read_file(kSource / "packaging/sluice.yaml"));
  EXPECT_EQ(read_file(kRoot / "lib/systemd/system/sluice.service"),
            read_file(kSource / "packaging/sluice.service"));
  EXPECT_EQ(read_file(kRoot / "usr/share/doc/sluice/README.md"), read_file(kSource / "README.md"));
  EXPECT_EQ(read_file(kRoot / "usr/share/sluice/grafana/sluice.json"),
            read_file(kSource / "deploy/grafana/sluice.json"));
  EXPECT_EQ(read_file(kRoot / "usr/share/sluice/prometheus/alerts.yaml"),
            read_file(kSource / "deploy/prometheus/alerts.yaml"));
}

TEST(Package, MarksTheConfigAsAConffile) {
  EXPECT_EQ(read_file(kControl / "conffiles"), "/etc/sluice/sluice.yaml\n");
}

TEST(Package, ControlNamesThePackageItsVersionAndDependencies) {
  const std::string control = read_file(kControl / "control");
  EXPECT_EQ(lines_starting(control, "Package:"), std::vector<std::string>{"Package: sluice"});
  EXPECT_EQ(lines_starting(control, "Version:"),
            std::vector<std::string>{std::string("Version: ") + SLUICE_VERSION});
  // dpkg-shlibdeps computed the shared libraries (libc6, libstdc++6, ...);
  // adduser is there for postinst.
  const std::vector<std::string> depends = lines_starting(control, "Depends:");
  ASSERT_EQ(depends.size(), 1u) << control;
  EXPECT_NE(depends[0].find("adduser"), std::string::npos) << depends[0];
  EXPECT_NE(depends[0].find("libc6 (>="), std::string::npos) << depends[0];
  EXPECT_NE(depends[0].find("libstdc++6 (>="), std::string::npos) << depends[0];
}

TEST(Package, PostinstCreatesTheSystemUser) {
  for (const char* script : {"postinst", "prerm", "postrm"}) {
    EXPECT_EQ(permissions(kControl / script), kExecutable) << script;
  }
  const std::string postinst = read_file(kControl / "postinst");
  EXPECT_NE(postinst.find("adduser --system --group"), std::string::npos) << postinst;
  // The unit runs as that user.
  const std::string unit = read_file(kRoot / "lib/systemd/system/sluice.service");
  EXPECT_EQ(lines_starting(unit, "User="), std::vector<std::string>{"User=sluice"});
  EXPECT_EQ(
      lines_starting(unit, "ExecStart="),
      std::vector<std::string>{"ExecStart=/usr/bin/sluice serve --config /etc/sluice/sluice.yaml"});
}

TEST(Package, ShippedConfigValidates) {
  const CommandResult r = run_command({(kRoot / "usr/bin/sluice").string(), "validate", "--config",
                                       (kRoot / "etc/sluice/sluice.yaml").string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The unpacked binary on a copy of the shipped config whose `listen` and
// `admin` lines are replaced by port 0 (the harness reads the real ports from
// the log): it comes up healthy, answers /v1/check, and exits 0 on SIGTERM
// (checked when `server` goes out of scope).
TEST(Package, ServesOneRequestOnTheShippedConfig) {
  const std::string shipped = read_file(kRoot / "etc/sluice/sluice.yaml");
  ASSERT_EQ(lines_starting(shipped, "listen:").size(), 1u);
  ASSERT_EQ(lines_starting(shipped, "admin:").size(), 1u);
  std::istringstream lines(shipped);
  std::string line;
  std::string config;
  while (std::getline(lines, line)) {
    if (line.rfind("listen:", 0) == 0 || line.rfind("admin:", 0) == 0) continue;
    config += line + "\n";
  }
  std::unique_ptr<SluiceProcess> server = SluiceProcess::start(config);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->wait_for_log("(decision API: /v1/check, /v1/auth;")) << server->log();

  const HttpResponse r = server->post("/v1/check", R"({"policy":"per-client","key":"user:42"})",
                                      {{"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 200);
  // per-client is 100 at once, 50 per second: one spent, back in 20 ms.
  EXPECT_EQ(
      r.body,
      R"({"allowed":true,"limit":100,"remaining":99,"reset_after_ms":20,"retry_after_ms":0})");
}

// The shipped config's commented consumers example: from its "# plans:"
// line to the end of that comment block, uncommented.
std::string consumers_example(const std::string& config) {
  std::istringstream lines(config);
  std::string line;
  std::string example;
  bool in_example = false;
  while (std::getline(lines, line)) {
    if (line == "# plans:") in_example = true;
    if (!in_example) continue;
    if (line.rfind("# ", 0) != 0) break;
    example += line.substr(2) + "\n";
  }
  return example;
}

// The words after `key=` on the unit's lines that set it.
std::vector<std::string> unit_values(const std::string& unit, const std::string& key) {
  std::vector<std::string> values;
  for (const std::string& line : lines_starting(unit, key + "=")) {
    std::istringstream words(line.substr(key.size() + 1));
    std::string word;
    while (words >> word) values.push_back(word);
  }
  return values;
}

// ProtectSystem=strict makes the whole file system read-only to the service
// but for the folders the unit names: PUT /admin/consumers writes the
// consumers file (a new file in its folder, renamed over it), so the folder
// the shipped config's example names must be one of them, or it fails 500.
TEST(Package, TheUnitLetsTheServiceWriteTheConsumersFileTheConfigNames) {
  const std::string unit = read_file(kRoot / "lib/systemd/system/sluice.service");
  ASSERT_EQ(unit_values(unit, "ProtectSystem"), std::vector<std::string>{"strict"});
  std::vector<fs::path> writable;
  for (const std::string& name : unit_values(unit, "StateDirectory")) {
    writable.push_back(fs::path("/var/lib") / name);
  }
  for (std::string path : unit_values(unit, "ReadWritePaths")) {
    if (path.front() == '-') path.erase(0, 1);  // "-": ignored when missing
    writable.push_back(path);
  }
  EXPECT_EQ(writable, std::vector<fs::path>{"/var/lib/sluice"});

  const std::string shipped = read_file(kRoot / "etc/sluice/sluice.yaml");
  const std::string example = consumers_example(shipped);
  const std::string file_key = "  file: ";
  const size_t at = example.find(file_key);
  ASSERT_NE(at, std::string::npos) << "no consumers example in the shipped config:\n" << shipped;
  const size_t end = example.find('\n', at);
  const std::string path = example.substr(at + file_key.size(), end - at - file_key.size());
  EXPECT_EQ(path, "/var/lib/sluice/consumers.yaml");
  EXPECT_NE(std::find(writable.begin(), writable.end(), fs::path(path).parent_path()),
            writable.end())
      << path << " is in no folder the unit lets the service write";

  // The example, uncommented into the shipped config, is valid (its file in
  // a temporary folder, as the commands above it create it: empty).
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  std::ofstream(dir + "/consumers.yaml").close();
  std::string config = shipped + example;
  config.replace(shipped.size() + at + file_key.size(), path.size(), dir + "/consumers.yaml");
  std::ofstream(dir + "/sluice.yaml") << config;
  const CommandResult r = run_command(
      {(kRoot / "usr/bin/sluice").string(), "validate", "--config", dir + "/sluice.yaml"});
  remove_dir(dir);
  EXPECT_EQ(r.exit_code, 0) << r.output << config;
}

TEST(Package, SystemdAcceptsTheUnit) {
  const char* analyze = "/usr/bin/systemd-analyze";
  if (::access(analyze, X_OK) != 0) {
    GTEST_SKIP() << "systemd-analyze is not installed here: the unit is not verified";
  }
  // systemd-analyze checks that ExecStart's program exists: a copy of the
  // unit names the unpacked binary instead of /usr/bin/sluice, and is
  // otherwise the packaged one. (--root would look for everything else, such
  // as /bin/kill and sysinit.target, in the package too.)
  const std::string unit = read_file(kRoot / "lib/systemd/system/sluice.service");
  const std::string exec = "ExecStart=/usr/bin/sluice ";
  const size_t at = unit.find(exec);
  ASSERT_NE(at, std::string::npos);
  std::string copy = unit;
  copy.replace(at, exec.size(), "ExecStart=" + (kRoot / "usr/bin/sluice").string() + " ");
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  {
    std::ofstream out(dir + "/sluice.service", std::ios::binary);
    out << copy;
  }
  const CommandResult r = run_command({analyze, "verify", dir + "/sluice.service"});
  remove_dir(dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Unknown keys and bad values are warnings (exit 0): there must be none.
  EXPECT_EQ(r.output, "") << "systemd-analyze has remarks on the unit";
}

}  // namespace
}  // namespace sluice::test

#include "sluice_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "wait_until.h"

#ifndef SLUICE_BINARY
#error "SLUICE_BINARY must name the sluice executable"
#endif

extern char** environ;

namespace sluice::test {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  // Write then rename, so a reload never reads half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::rename(tmp.c_str(), path.c_str());
}

// The port at the end of the first "<prefix>http[s]://HOST:PORT" in `log`; 0 if absent.
uint16_t port_after(const std::string& log, const std::string& prefix) {
  const size_t at = log.find(prefix + "http");  // http:// or https://
  if (at == std::string::npos) return 0;
  size_t end = log.find_first_of(" \n", at + prefix.size());
  const std::string url = log.substr(at, end - at);
  const size_t colon = url.rfind(':');
  return static_cast<uint16_t>(std::atoi(url.c_str() + colon + 1));
}

pid_t spawn(const std::string& config_path, const std::string& out_path,
            const std::string& err_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> args = {SLUICE_BINARY, "serve", "--config", config_path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, SLUICE_BINARY, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

}  // namespace

std::string make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/sluice-it-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return {};
  return templ;
}

void remove_dir(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

std::unique_ptr<SluiceProcess> SluiceProcess::start(const std::string& yaml,
                                                    const std::string& listen_host,
                                                    const Files& files) {
  std::unique_ptr<SluiceProcess> p(new SluiceProcess());
  p->dir_ = make_temp_dir();
  if (p->dir_.empty()) {
    ADD_FAILURE() << "cannot create a temporary directory";
    return nullptr;
  }
  p->config_path_ = p->dir_ + "/sluice.yaml";
  p->log_path_ = p->dir_ + "/stderr.log";
  p->host_ = listen_host;
  const std::string host_text = listen_host.find(':') != std::string::npos
                                    ? "\"[" + listen_host + "]:0\""
                                    : listen_host + ":0";
  p->header_ = "listen: " + host_text + "\nadmin: 127.0.0.1:0\n";
  for (const auto& [name, content] : files) write_file(p->dir_ + "/" + name, content);
  write_file(p->config_path_, p->header_ + yaml);
  return launch(std::move(p));
}

std::unique_ptr<SluiceProcess> SluiceProcess::start_prepared(const std::string& dir,
                                                             const std::string& config_path) {
  std::unique_ptr<SluiceProcess> p(new SluiceProcess());
  p->dir_ = dir;
  p->config_path_ = config_path;
  p->log_path_ = p->dir_ + "/stderr.log";
  p->host_ = "127.0.0.1";
  p->header_ = kListenLines;
  return launch(std::move(p));
}

std::unique_ptr<SluiceProcess> SluiceProcess::launch(std::unique_ptr<SluiceProcess> p) {
  p->pid_ = spawn(p->config_path_, p->dir_ + "/stdout.log", p->log_path_);
  if (p->pid_ < 0) {
    ADD_FAILURE() << "cannot start " << SLUICE_BINARY;
    return nullptr;
  }
  // Startup under the sanitizers takes a moment; bound it generously.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(p->pid_, &status, WNOHANG) == p->pid_) {
      p->exited_ = true;
      ADD_FAILURE() << "sluice exited during startup (status " << status << "); log:\n" << p->log();
      return nullptr;
    }
    const std::string log = p->log();
    p->port_ = port_after(log, "listening on ");
    p->admin_port_ = port_after(log, "admin on ");
    p->decision_port_ = port_after(log, "decision API on ");
    if (p->port_ != 0 && p->admin_port_ != 0) {
      if (HttpConnection::can_connect("127.0.0.1", p->admin_port_)) {
        // 401: the server is up, behind admin_token_all.
        const HttpResponse health = p->admin_get("/healthz");
        if (health.status == 200 || health.status == 401) return p;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "sluice did not become healthy within 30 s; log:\n" << p->log();
  return nullptr;
}

SluiceProcess::~SluiceProcess() {
  // Every test ends with a graceful stop, so every test also checks that the
  // server exits 0 and that the sanitizers (when built with them) found nothing.
  if (pid_ > 0 && !exited_) {
    ::kill(pid_, SIGTERM);
    std::string how;
    const std::optional<int> code = wait_exit(std::chrono::seconds(30), &how);
    if (!code) {
      ADD_FAILURE() << "sluice did not exit after SIGTERM (" << how << "); log:\n" << log();
      if (!exited_) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
      }
    } else if (*code != 0) {
      ADD_FAILURE() << "sluice exited with code " << *code << " after SIGTERM; log:\n" << log();
    }
  }
  const std::string text = log();
  if (text.find("Sanitizer") != std::string::npos ||
      text.find("runtime error:") != std::string::npos) {
    ADD_FAILURE() << "sanitizer report in the server's log:\n" << text;
  }
  remove_dir(dir_);
}

HttpResponse SluiceProcess::get(
    const std::string& target,
    const std::vector<std::pair<std::string, std::string>>& headers) const {
  return http_request(host_, port_, "GET", target, headers);
}

HttpResponse SluiceProcess::post(
    const std::string& target, const std::string& body,
    const std::vector<std::pair<std::string, std::string>>& headers) const {
  return http_request(host_, port_, "POST", target, headers, body);
}

HttpResponse SluiceProcess::admin_get(const std::string& target) const {
  return http_request("127.0.0.1", admin_port_, "GET", target);
}

HttpResponse SluiceProcess::admin_post(const std::string& target, const std::string& body) const {
  return http_request("127.0.0.1", admin_port_, "POST", target,
                      {{"Content-Type", "application/json"}}, body);
}

HttpResponse SluiceProcess::admin_request(
    const std::string& method, const std::string& target,
    const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& body) const {
  return http_request("127.0.0.1", admin_port_, method, target, headers, body);
}

HttpResponse SluiceProcess::decision_request(
    const std::string& method, const std::string& target,
    const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& body) const {
  return http_request("127.0.0.1", decision_port_, method, target, headers, body);
}

std::unique_ptr<HttpConnection> SluiceProcess::connect() const {
  return std::make_unique<HttpConnection>(host_, port_);
}

void SluiceProcess::rewrite_config(const std::string& yaml) const {
  write_file(config_path_, header_ + yaml);
}

void SluiceProcess::write_config_raw(const std::string& text) const {
  write_file(config_path_, text);
}

void SluiceProcess::send_signal(int signal) const {
  ::kill(pid_, signal);
}

std::optional<int> SluiceProcess::wait_exit(std::chrono::milliseconds timeout,
                                            std::string* description) {
  int status = 0;
  if (!wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout)) {
    if (description) *description = "still running after the timeout";
    return std::nullopt;
  }
  exited_ = true;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (description) *description = "killed by signal " + std::to_string(WTERMSIG(status));
  return std::nullopt;
}

std::string SluiceProcess::log() const {
  return read_file(log_path_);
}

std::string SluiceProcess::access_log() const {
  return read_file(dir_ + "/stdout.log");
}

bool SluiceProcess::wait_for_log(const std::string& text, std::chrono::milliseconds timeout) const {
  return wait_until([&] { return log().find(text) != std::string::npos; }, timeout);
}

std::string SluiceProcess::wait_for_access_log(const std::vector<std::string>& parts,
                                               std::chrono::milliseconds timeout) const {
  std::string log;
  wait_until(
      [&] {
        log = access_log();
        for (const std::string& p : parts)
          if (log.find(p) == std::string::npos) return false;
        return true;
      },
      timeout);
  return log;
}

long long SluiceProcess::metric(const std::string& series) const {
  const HttpResponse r = admin_get("/metrics");
  std::istringstream lines(r.body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::atoll(line.c_str() + series.size() + 1);
    }
  }
  return -1;
}

bool SluiceProcess::wait_for_metric(const std::string& series, long long value,
                                    std::chrono::milliseconds timeout) const {
  return wait_until([&] { return metric(series) == value; }, timeout);
}

bool SluiceProcess::wait_for_readyz(int status, std::chrono::milliseconds timeout) const {
  return wait_until([&] { return admin_get("/readyz").status == status; }, timeout);
}

int SluiceProcess::run_and_capture(const std::string& yaml, std::string* stderr_text) {
  const std::string dir = make_temp_dir();
  const std::string config = dir + "/sluice.yaml";
  write_file(config, yaml);
  const pid_t pid = spawn(config, dir + "/stdout.log", dir + "/stderr.log");
  int status = 0;
  int code = -1;
  if (wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; },
                 std::chrono::seconds(30))) {
    code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  } else {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  if (stderr_text) *stderr_text = read_file(dir + "/stderr.log");
  remove_dir(dir);
  return code;
}

}  // namespace sluice::test

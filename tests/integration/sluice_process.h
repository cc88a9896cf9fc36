// Runs the real `sluice serve` binary for an integration test: writes the
// config to a temporary directory, starts the process with its output in
// files there, learns the ports it bound (the config asks for port 0; the
// startup log names the real ones), waits for /healthz, and stops it by PID.
// Every wait is bounded; the destructor kills a process still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "http_client.h"

namespace sluice::test {

class SluiceProcess {
 public:
  // `yaml` is the config without `listen`/`admin`: the harness adds
  // `listen: <listen_host>:0` and `admin: 127.0.0.1:0`. Fails the calling
  // test (gtest fatal failure) and returns null if the server does not come up.
  // `files` are written into the config's directory first (name -> content),
  // for files the config names by a relative path (token files).
  using Files = std::vector<std::pair<std::string, std::string>>;
  static std::unique_ptr<SluiceProcess> start(const std::string& yaml,
                                              const std::string& listen_host = "127.0.0.1",
                                              const Files& files = {});
  // Runs `sluice serve --config <config_path>` on files the test laid out
  // itself in `dir` (from make_temp_dir(); symlinks, folders), which the
  // process then owns and removes. The config says `listen:` and `admin:`
  // itself, with port 0 (kListenLines).
  static std::unique_ptr<SluiceProcess> start_prepared(const std::string& dir,
                                                       const std::string& config_path);
  static constexpr const char* kListenLines = "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n";
  ~SluiceProcess();

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  uint16_t admin_port() const { return admin_port_; }
  // The port of decision_api.listen (the config asks for port 0); 0 if none.
  uint16_t decision_port() const { return decision_port_; }
  pid_t pid() const { return pid_; }
  const std::string& config_path() const { return config_path_; }
  // The temporary folder of the config, the logs and the test's files.
  const std::string& dir() const { return dir_; }

  // Requests on the listen port (one connection each) and the admin port.
  HttpResponse get(const std::string& target,
                   const std::vector<std::pair<std::string, std::string>>& headers = {}) const;
  HttpResponse post(const std::string& target, const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& headers = {}) const;
  HttpResponse admin_get(const std::string& target) const;
  // A JSON body (Content-Type: application/json), or none.
  HttpResponse admin_post(const std::string& target, const std::string& body = "") const;
  // Any request on the admin port, headers exactly as given (plus Host and
  // Content-Length when absent).
  HttpResponse admin_request(const std::string& method, const std::string& target,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body = "") const;
  // A request on the decision_api port.
  HttpResponse decision_request(const std::string& method, const std::string& target,
                                const std::vector<std::pair<std::string, std::string>>& headers,
                                const std::string& body = "") const;
  std::unique_ptr<HttpConnection> connect() const;

  // Replaces the config file (with the same listen/admin lines as at start).
  void rewrite_config(const std::string& yaml) const;
  // Replaces the config file with exactly `text`.
  void write_config_raw(const std::string& text) const;
  void send_signal(int signal) const;
  // Waits until the process exits; its exit code, or nullopt on timeout or
  // death by a signal (then `description` says which).
  std::optional<int> wait_exit(std::chrono::milliseconds timeout,
                               std::string* description = nullptr);
  // The server's stderr (its log) so far.
  std::string log() const;
  // The server's stdout (the access log) so far.
  std::string access_log() const;
  // Waits until the access log holds each of `parts` (lines are written once
  // their responses are sent); returns the log then, or after `timeout`.
  std::string wait_for_access_log(
      const std::vector<std::string>& parts,
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // Waits until the log contains `text`; false after `timeout`.
  bool wait_for_log(const std::string& text,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // The value of one series in /metrics, e.g.
  // metric(R"(sluice_requests_total{route="GET /a",result="allowed"})"); -1 if absent.
  long long metric(const std::string& series) const;
  // Waits until metric(series) is `value`; false after `timeout`.
  bool wait_for_metric(const std::string& series, long long value,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // Waits until the admin port's /readyz answers `status` (200 or 503);
  // false after `timeout`.
  bool wait_for_readyz(int status,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // Runs `sluice serve --config <file with yaml verbatim>` and returns its exit
  // code and stderr (for configs that must be refused at startup).
  static int run_and_capture(const std::string& yaml, std::string* stderr_text);

 private:
  SluiceProcess() = default;
  // Spawns the process on its config and waits until it serves.
  static std::unique_ptr<SluiceProcess> launch(std::unique_ptr<SluiceProcess> p);
  std::string dir_;
  std::string config_path_;
  std::string log_path_;
  std::string host_;
  std::string header_;  // the listen/admin lines
  pid_t pid_ = -1;
  bool exited_ = false;
  uint16_t port_ = 0;
  uint16_t admin_port_ = 0;
  uint16_t decision_port_ = 0;
};

// A temporary directory, and its removal with everything in it.
std::string make_temp_dir();
void remove_dir(const std::string& dir);

}  // namespace sluice::test

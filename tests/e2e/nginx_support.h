// Debian's real nginx for the end-to-end tests: started as the current user
// with every file in a temporary directory, on a free loopback port, and
// stopped by PID. Header-only, beside the integration harness it builds on.
#pragma once

#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "gateway_support.h"
#include "sluice_process.h"

namespace sluice::test {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Replaces every `from` in `text` by `to`; returns how many were replaced.
inline int replace_all(std::string& text, const std::string& from, const std::string& to) {
  int n = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    ++n;
  }
  return n;
}

inline std::string nginx_binary() {
  for (const char* p : {"/usr/sbin/nginx", "/usr/bin/nginx"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return {};
}

// nginx serving one site file, built by `site(port)` for the free port it
// tries (up to 5 ports, in case one is taken between the pick and the bind).
class Nginx {
 public:
  explicit Nginx(const std::function<std::string(uint16_t port)>& site) {
    binary_ = nginx_binary();
    if (binary_.empty()) {
      ADD_FAILURE() << "nginx is not installed (scripts/install-deps.sh installs it)";
      return;
    }
    dir_ = make_temp_dir();
    for (int attempt = 0; attempt < 5 && port_ == 0; ++attempt) {
      const uint16_t port = pick_free_port();
      const std::string conf = site(port);
      if (conf.empty()) return;
      write_text(dir_ + "/site.conf", conf);
      write_text(dir_ + "/nginx.conf", main_conf());
      pid_ = spawn_program({binary_, "-p", dir_ + "/", "-c", dir_ + "/nginx.conf", "-g",
                            "daemon off; pid " + dir_ + "/nginx.pid;"},
                           dir_ + "/stderr.log");
      if (pid_ > 0 && wait_listening(port, std::chrono::seconds(10))) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == 0) port_ = port;
      }
      if (port_ == 0 && pid_ > 0) {
        stop_child(pid_);
        pid_ = -1;
      }
    }
    if (port_ == 0) ADD_FAILURE() << "nginx did not start:\n" << log();
  }
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;
  ~Nginx() {
    if (pid_ > 0) {
      const int status = stop_child(pid_);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "nginx status " << status << "\n"
          << log();
    }
    remove_tree(dir_);
  }

  uint16_t port() const { return port_; }
  std::string log() const {
    return read_text(dir_ + "/stderr.log") + read_text(dir_ + "/error.log");
  }

 private:
  std::string main_conf() const {
    // As root, nginx would switch its workers to `nobody`, who cannot write
    // the temporary directory: keep them as the current user.
    const passwd* pw = ::getpwuid(::geteuid());
    std::string conf;
    if (::geteuid() == 0 && pw != nullptr) conf += "user " + std::string(pw->pw_name) + ";\n";
    conf += "worker_processes 1;\nerror_log " + dir_ + "/error.log info;\n";
    conf += "events { worker_connections 256; }\nhttp {\n";
    conf += "  access_log " + dir_ + "/access.log;\n";
    for (const char* temp : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
      conf += "  " + std::string(temp) + "_temp_path " + dir_ + "/" + temp + ";\n";
    }
    conf += "  include " + dir_ + "/site.conf;\n}\n";
    return conf;
  }
  // The temporary directory holds nginx's temp directories too.
  static void remove_tree(const std::string& dir) {
    if (dir.empty()) return;
    for (const char* temp : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
      remove_dir(dir + "/" + temp);
    }
    remove_dir(dir);
  }

  std::string binary_;
  std::string dir_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

}  // namespace sluice::test

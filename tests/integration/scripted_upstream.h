// ScriptedUpstream: a loopback HTTP/1.1 upstream for the cost tests that
// answers every request with bytes the test wrote (any header, trailer or
// body, cut short or not), in pieces: with hold_between_pieces() it sends
// the first piece, then waits for release() before the rest, so a test can
// see what reached the client meanwhile. Header-only; every wait bounded;
// the destructor stops its threads.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gateway_support.h"

namespace sluice::test {

class ScriptedUpstream {
 public:
  ScriptedUpstream() {
    listen_fd_ = bound_loopback_socket(port_);
    if (port_ == 0 || ::listen(listen_fd_, 64) != 0) {
      port_ = 0;
      return;
    }
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~ScriptedUpstream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    gate_.notify_all();
    if (accept_thread_.joinable()) accept_thread_.join();
    for (std::thread& t : threads_) t.join();
    ::close(listen_fd_);
  }
  ScriptedUpstream(const ScriptedUpstream&) = delete;
  ScriptedUpstream& operator=(const ScriptedUpstream&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }

  // The answer to every request from now on; `close_after`: the connection
  // closes once it is sent (a response cut short).
  void answer(std::vector<std::string> pieces, bool close_after = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    pieces_ = std::move(pieces);
    close_after_ = close_after;
  }
  // A whole response with Content-Length: `fields` are "Name: value\r\n" lines.
  void answer_body(const std::string& fields, const std::string& body) {
    answer({"HTTP/1.1 200 OK\r\n" + fields + "Content-Length: " + std::to_string(body.size()) +
            "\r\n\r\n" + body});
  }
  void hold_between_pieces() {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_ = false;
    }
    gate_.notify_all();
  }

 private:
  void accept_loop() {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
      }
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  // Reads one request (header, then a Content-Length body); false when the
  // connection ends or the server stops first.
  bool read_request(int fd, std::string& buffer) {
    while (true) {
      const size_t end = buffer.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t length = 0;
        const size_t at = buffer.find("Content-Length: ");
        if (at != std::string::npos && at < end) length = std::stoul(buffer.substr(at + 16));
        if (buffer.size() >= end + 4 + length) {
          buffer.erase(0, end + 4 + length);
          return true;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return false;
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) return false;
      buffer.append(chunk, static_cast<size_t>(n));
    }
  }

  void serve(int fd) {
    std::string buffer;
    while (read_request(fd, buffer)) {
      ++requests_;
      std::vector<std::string> pieces;
      bool close_after = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pieces = pieces_;
        close_after = close_after_;
      }
      for (size_t i = 0; i < pieces.size(); ++i) {
        if (i > 0) {
          std::unique_lock<std::mutex> lock(mutex_);
          gate_.wait_for(lock, std::chrono::seconds(10), [this] { return !held_ || stop_; });
        }
        if (::send(fd, pieces[i].data(), pieces[i].size(), MSG_NOSIGNAL) < 0) break;
      }
      if (close_after) break;
    }
    ::close(fd);
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread accept_thread_;
  std::vector<std::thread> threads_;  // the accept thread's only
  std::mutex mutex_;
  std::condition_variable gate_;
  bool stop_ = false;
  bool held_ = false;
  std::vector<std::string> pieces_;
  bool close_after_ = false;
  std::atomic<int> requests_{0};
};

}  // namespace sluice::test

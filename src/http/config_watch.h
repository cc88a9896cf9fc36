// ConfigWatch: notices when the files a config names change on disk
// (`watch_config: true`), for the server to reload them as SIGHUP does.
//
// It watches the folders that hold the files (inotify), never the files
// themselves: an editor writes a temporary file and renames it over the
// old one, and a Kubernetes ConfigMap swaps its `..data` symlink to a new
// folder, and a watch on the old file's inode sees neither. A symlinked
// file's target folder is watched too. Any event in those folders starts a
// check once the folders have been quiet for `debounce` (Debounce below), so
// a burst of writes is one check; the check compares what each path holds
// (config::content_fingerprint) with what it held at the previous check and
// hands the paths that differ to the callback, which decides what to do.
// Paths whose content did not change (a `touch`, a file written again with
// the same bytes, a log written beside the config) start no reload.
//
// Failure: when inotify cannot be used or a folder cannot be watched
// (fs.inotify.max_user_watches), it logs the reason once and watches what
// it can.
//
// Thread-safety: all methods and the callback run on the one thread that
// runs `io` (the server's control thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

namespace sluice::http {

// When a burst of events is over: `quiet` after its last event, and never
// later than `max_delay` after its first, so a folder that never goes quiet
// (a file rewritten in a loop) still gets its checks. Pure: the caller gives
// the time.
class Debounce {
 public:
  using Clock = std::chrono::steady_clock;
  Debounce(std::chrono::milliseconds quiet, std::chrono::milliseconds max_delay)
      : quiet_(quiet), max_delay_(max_delay) {}

  // An event at `now`: when the check is due.
  Clock::time_point on_event(Clock::time_point now);
  // The check ran: the next event starts a new burst.
  void reset() { first_.reset(); }

 private:
  std::chrono::milliseconds quiet_;
  std::chrono::milliseconds max_delay_;
  std::optional<Clock::time_point> first_;
};

class ConfigWatch {
 public:
  // The paths whose content differs from the previous check (empty: the
  // events changed nothing that is watched).
  using OnCheck = std::function<void(const std::vector<std::string>& changed)>;

  ConfigWatch(boost::asio::io_context& io, std::chrono::milliseconds debounce, OnCheck on_check);
  ~ConfigWatch();
  ConfigWatch(const ConfigWatch&) = delete;
  ConfigWatch& operator=(const ConfigWatch&) = delete;

  // Watches `paths` (files or folders) from now on, instead of what it
  // watched before. A path watched before keeps the content it was last
  // compared with; a new one is compared with what it holds now.
  void watch(const std::vector<std::string>& paths);

  // The folders inotify watches now (for the startup log and the tests).
  size_t folder_count() const { return folders_.size(); }

 private:
  void do_read();
  void on_events(size_t bytes);
  void check();
  // Watches exactly the folders the paths need now (symlinks may point
  // elsewhere after a swap); drops the others.
  void sync_folders();
  // The folders `path` needs watched.
  static void folders_of(const std::string& path, std::set<std::string>& out);

  boost::asio::posix::stream_descriptor inotify_;
  boost::asio::steady_timer timer_;
  Debounce debounce_;
  OnCheck on_check_;
  std::vector<std::string> paths_;
  std::map<std::string, std::optional<uint64_t>> seen_;  // path -> content at the last check
  std::map<std::string, int> folders_;                   // folder -> inotify watch descriptor
  std::set<std::string> refused_;                        // folders already logged as unwatchable
  char buffer_[16 * 1024];
};

}  // namespace sluice::http

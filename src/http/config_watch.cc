#include "http/config_watch.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "config/files.h"

namespace sluice::http {

namespace fs = std::filesystem;

namespace {

// Everything that can replace what a path holds: a write closed, a rename
// into or out of the folder (editors, ConfigMap `..data` swaps), a file or
// symlink created or removed, permissions changed; and the folder itself
// going away. Not IN_MODIFY: a log written beside the config would start
// a check on every line; a writer that never closes its file is not a
// config editor.
constexpr uint32_t kEvents = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
                             IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

// A folder's one name: two spellings of it ("." and its absolute path, a
// symlink and its target) are one inotify watch.
std::string folder_key(const fs::path& folder) {
  std::error_code ec;
  fs::path canonical = fs::canonical(folder, ec);
  return ec ? fs::absolute(folder, ec).lexically_normal().string() : canonical.string();
}

}  // namespace

Debounce::Clock::time_point Debounce::on_event(Clock::time_point now) {
  if (!first_) first_ = now;
  return std::min(now + quiet_, *first_ + max_delay_);
}

ConfigWatch::ConfigWatch(boost::asio::io_context& io, std::chrono::milliseconds debounce,
                         OnCheck on_check)
    : inotify_(io), timer_(io), debounce_(debounce, 5 * debounce), on_check_(std::move(on_check)) {
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    spdlog::error("watch_config: cannot watch files (inotify: {}); reload with SIGHUP instead",
                  std::strerror(errno));
    return;
  }
  inotify_.assign(fd);
  do_read();
}

ConfigWatch::~ConfigWatch() = default;  // closing the descriptor removes every watch

void ConfigWatch::watch(const std::vector<std::string>& paths) {
  paths_ = paths;
  std::map<std::string, std::optional<uint64_t>> seen;
  for (const std::string& p : paths_) {
    auto it = seen_.find(p);
    seen[p] = it != seen_.end() ? it->second : config::content_fingerprint(p);
  }
  seen_ = std::move(seen);
  sync_folders();
}

void ConfigWatch::do_read() {
  inotify_.async_read_some(
      boost::asio::buffer(buffer_), [this](boost::system::error_code ec, size_t bytes) {
        // Aborted: the watch is gone (do not touch `this`).
        if (ec == boost::asio::error::operation_aborted) return;
        if (ec) {
          spdlog::error("watch_config: reading inotify events: {}", ec.message());
          return;
        }
        on_events(bytes);
        do_read();
      });
}

void ConfigWatch::on_events(size_t bytes) {
  for (size_t at = 0; at + sizeof(inotify_event) <= bytes;) {
    inotify_event event;
    std::memcpy(&event, buffer_ + at, sizeof event);
    at += sizeof(inotify_event) + event.len;
    // The kernel dropped the watch (its folder was removed): the next
    // check watches what the paths need then.
    if (event.mask & IN_IGNORED) {
      const int wd = event.wd;  // (a lambda cannot capture inotify_event: flexible array member)
      std::erase_if(folders_, [wd](const auto& f) { return f.second == wd; });
    }
  }
  timer_.expires_at(debounce_.on_event(Debounce::Clock::now()));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) check();
  });
}

void ConfigWatch::check() {
  debounce_.reset();
  std::vector<std::string> changed;
  for (const std::string& p : paths_) {
    std::optional<uint64_t> now = config::content_fingerprint(p);
    std::optional<uint64_t>& before = seen_[p];
    if (now != before) {
      changed.push_back(p);
      before = now;
    }
  }
  sync_folders();
  on_check_(changed);
}

void ConfigWatch::folders_of(const std::string& path, std::set<std::string>& out) {
  std::error_code ec;
  const fs::path p(path);
  // The folder that holds it; for a path that does not exist yet, the
  // nearest folder above it that does, where it will appear.
  fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  while (!fs::is_directory(parent, ec) && parent.has_parent_path() &&
         parent != parent.parent_path()) {
    parent = parent.parent_path();
  }
  out.insert(folder_key(parent));
  if (fs::is_directory(p, ec)) {
    // A folder (the RLS descriptors): itself and its folders, leaving out
    // what content_fingerprint leaves out.
    out.insert(folder_key(p));
    fs::recursive_directory_iterator it(p, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code entry_ec;
      if (!it->is_directory(entry_ec)) continue;
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        it.disable_recursion_pending();
      } else {
        out.insert(folder_key(it->path()));
      }
    }
    return;
  }
  // A symlink's target may live elsewhere and change there.
  const fs::path target = fs::canonical(p, ec);
  if (!ec) out.insert(target.parent_path().string());
}

void ConfigWatch::sync_folders() {
  if (!inotify_.is_open()) return;
  std::set<std::string> wanted;
  for (const std::string& p : paths_) folders_of(p, wanted);
  for (auto it = folders_.begin(); it != folders_.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    const int wd = it->second;
    it = folders_.erase(it);
    const bool shared = std::any_of(folders_.begin(), folders_.end(),
                                    [&](const auto& f) { return f.second == wd; });
    if (!shared) ::inotify_rm_watch(inotify_.native_handle(), wd);
  }
  for (const std::string& folder : wanted) {
    if (folders_.contains(folder)) continue;
    const int wd = ::inotify_add_watch(inotify_.native_handle(), folder.c_str(), kEvents);
    if (wd < 0) {
      if (refused_.insert(folder).second) {
        spdlog::error("watch_config: cannot watch {}: {}; its changes need SIGHUP", folder,
                      std::strerror(errno));
      }
      continue;
    }
    refused_.erase(folder);
    folders_[folder] = wd;
  }
}

}  // namespace sluice::http

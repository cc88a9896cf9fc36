#include "config/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

#include "util/fnv1a.h"

namespace sluice::config {

namespace {

std::string joined(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

// Folds the bytes of the regular file at `path`, then their count, into
// `h` (the count keeps one file's end from reading as the next one's name);
// false when it cannot be read.
bool hash_file(const std::string& path, uint64_t* h) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  char buf[8192];
  uint64_t bytes = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    *h = util::fnv1a64(std::string_view(buf, static_cast<size_t>(n)), *h);
    bytes += static_cast<uint64_t>(n);
  }
  ::close(fd);
  const std::string count = std::to_string(bytes);
  *h = util::fnv1a64(std::string_view(count.c_str(), count.size() + 1), *h);
  return true;
}

}  // namespace

std::optional<std::string> read_small_file(const std::string& path, std::string_view what,
                                           size_t max_bytes, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = joined({"cannot open ", what, ": ", std::strerror(errno)});
    return std::nullopt;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    *error = joined({"cannot read ", what, ": not a regular file"});
    return std::nullopt;
  }
  std::string text;
  text.reserve(std::min(static_cast<size_t>(st.st_size), max_bytes + 1));
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      *error = joined({"cannot read ", what, ": ", std::strerror(saved)});
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      *error = joined({what, " is larger than ", std::to_string(max_bytes), " bytes"});
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

std::string relative_to_file(const std::string& from, const std::string& path) {
  std::string full = path;
  if (!path.empty() && path.front() != '/') {
    const size_t slash = from.rfind('/');
    if (slash != std::string::npos) full = from.substr(0, slash + 1) + path;
  }
  const bool absolute = !full.empty() && full.front() == '/';
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= full.size()) {
    size_t end = full.find('/', at);
    if (end == std::string::npos) end = full.size();
    const std::string part = full.substr(at, end - at);
    at = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else if (!(part == ".." && absolute)) {  // "/.." is "/"
      parts.push_back(part);
    }
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  return out.empty() ? std::string(".") : out;
}

std::optional<uint64_t> content_fingerprint(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec) return std::nullopt;
  uint64_t h = util::kFnv1a64Basis;
  if (fs::is_regular_file(status)) {
    if (!hash_file(path, &h)) return std::nullopt;
    return h;
  }
  if (!fs::is_directory(status)) return std::nullopt;
  std::vector<std::string> files;
  fs::recursive_directory_iterator it(path, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(entry_ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(entry_ec)) files.push_back(it->path().string());
  }
  if (ec) return std::nullopt;
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    const std::string_view relative = std::string_view(file).substr(path.size());
    h = util::fnv1a64(std::string_view(relative.data(), relative.size() + 1), h);
    // An unreadable file is a state of its own: readable again is a change.
    if (!hash_file(file, &h)) h = util::fnv1a64("\x01", h);
  }
  return h;
}

namespace {

constexpr std::string_view kTempMark = ".tmp-";

// "<pid>-<n>" after "<file>.tmp-": the pid, or 0 when `rest` is not that.
pid_t temp_writer(std::string_view rest) {
  const size_t dash = rest.find('-');
  const std::string_view pid = rest.substr(0, dash);
  const std::string_view n = dash == std::string_view::npos ? "" : rest.substr(dash + 1);
  const auto digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 10 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(pid) || !digits(n)) return 0;
  const long value = std::stol(std::string(pid));
  return value > 0 && value <= std::numeric_limits<pid_t>::max() ? static_cast<pid_t>(value) : 0;
}

}  // namespace

std::vector<std::string> remove_stray_temporaries(const std::string& path) {
  std::vector<std::string> removed;
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string base =
      joined({path.substr(slash == std::string::npos ? 0 : slash + 1), kTempMark});
  DIR* dir = ::opendir(folder.empty() ? "/" : folder.c_str());
  if (dir == nullptr) return removed;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (!name.starts_with(base)) continue;
    const pid_t writer = temp_writer(name.substr(base.size()));
    if (writer == 0) continue;
    // Another process still running may be writing it right now; this
    // process has not written yet (a container's pid 1 is this one again).
    if (writer != ::getpid() && !(::kill(writer, 0) != 0 && errno == ESRCH)) continue;
    const std::string file = joined({folder, "/", name});
    struct stat st;
    if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::unlink(file.c_str()) == 0) removed.push_back(file);
  }
  ::closedir(dir);
  std::sort(removed.begin(), removed.end());
  return removed;
}

bool write_file_atomically(const std::string& path, std::string_view text, std::string* error) {
  static std::atomic<unsigned> counter{0};
  const std::string temp =
      joined({path, kTempMark, std::to_string(::getpid()), "-",
              std::to_string(counter.fetch_add(1, std::memory_order_relaxed))});
  struct stat st;
  const mode_t mode = ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644;
  auto fail = [&](std::string_view step, int fd) {
    const int saved = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    *error = joined({"cannot ", step, ": ", std::strerror(saved)});
    return false;
  };
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return fail("create " + temp, -1);
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write " + temp, fd);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync " + temp, fd);
  if (::close(fd) != 0) return fail("close " + temp, -1);
  if (::rename(temp.c_str(), path.c_str()) != 0) return fail("rename " + temp + " to " + path, -1);
  // The rename itself is durable once the folder is.
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return true;
}

}  // namespace sluice::config

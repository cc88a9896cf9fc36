#include "config/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace sluice::config {

namespace {

std::string joined(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
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

}  // namespace sluice::config

#include "rls/handed_sockets.h"

#include <sys/stat.h>

namespace sluice::rls {

void HandedSockets::add(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  inodes_[fd] = st.st_ino;
}

size_t HandedSockets::count_open() {
  for (auto it = inodes_.begin(); it != inodes_.end();) {
    struct stat st {};
    const bool same =
        ::fstat(it->first, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == it->second;
    it = same ? std::next(it) : inodes_.erase(it);
  }
  return inodes_.size();
}

}  // namespace sluice::rls

// HandedSockets: sockets given to a library that closes them itself (the
// accepted connections of the gRPC port, handed to gRPC), and how many of
// them are still open.
//
// gRPC says nothing when it closes a connection. A descriptor is still the
// socket handed over while it names the same socket inode; once gRPC closes
// it, the number is free (fstat fails) or names another file (the kernel
// reuses the lowest free number), with another inode. So count_open() checks
// each descriptor with one fstat: cheap (well under a microsecond each),
// exact, and needs nothing from gRPC.
//
// Thread-safety: none; one thread (the acceptor's) uses it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <unordered_map>

namespace sluice::rls {

class HandedSockets {
 public:
  // Records `fd`, an open socket about to be handed over. A number recorded
  // before is replaced: the kernel gave it again, so its old socket closed.
  void add(int fd);
  // Forgets the sockets closed since they were added; how many are left.
  size_t count_open();
  // The sockets recorded, closed ones not yet forgotten included.
  size_t recorded() const { return inodes_.size(); }

 private:
  std::unordered_map<int, ino_t> inodes_;
};

}  // namespace sluice::rls

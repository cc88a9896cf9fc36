// Reading (and, for the consumers file, writing) the files a config names: the config itself, token
// files, and the paths in it, which are relative to the folder of the file that names them.
// Thread-safety: pure functions (they read the file system).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::config {

// Reads a whole regular file of at most `max_bytes`. On failure, `error`
// says why, naming the file as `what` ("the config file"), e.g. "cannot open
// the config file: No such file or directory".
std::optional<std::string> read_small_file(const std::string& path, std::string_view what,
                                           size_t max_bytes, std::string* error);

// Replaces the file at `path` with `text` so that a crash leaves the old
// file or the new one, never a part: a temporary file in the same folder
// (with the old file's permissions), fsync, rename over `path`, fsync of
// the folder. On failure `error` says which step failed and `path` is as it was.
bool write_file_atomically(const std::string& path, std::string_view text, std::string* error);

// Removes the temporary files of write_file_atomically(path, ...) that a
// process killed mid-write left ("<path>.tmp-<pid>-<n>", regular files
// only): those of a process that no longer runs, and this process's own
// (call it before this process writes `path`: a restarted container's pid
// may be the one that died). Nothing else in the folder is touched. Returns
// the paths removed; a file that cannot be removed is skipped.
std::vector<std::string> remove_stray_temporaries(const std::string& path);

// `path` as seen from the folder of the file `from`: an absolute path as it
// is, a relative one joined to that folder; "." and ".." segments resolved,
// a trailing slash dropped. (No std::filesystem: this must not touch the disk.)
std::string relative_to_file(const std::string& from, const std::string& path);

// A hash of what `path` holds, to tell whether it changed: a file's content
// (through symlinks), or a folder's files by relative name and content,
// recursively, leaving out names that start with '.' as the RLS descriptor
// loader does (a Kubernetes ConfigMap's `..data` and the timestamped
// folders behind it). nullopt when it cannot be read (missing, no
// permission). Reads in small blocks: memory does not grow with the size.
std::optional<uint64_t> content_fingerprint(const std::string& path);

}  // namespace sluice::config

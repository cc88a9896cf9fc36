// ConsumersWriter: writes the changes PUT and DELETE /admin/consumers make to
// the consumers file, on a thread of its own. Reading, editing and replacing
// a file of a million consumers takes long enough to stall every other
// admin request (/healthz, /readyz, /metrics) if the control thread did it;
// here the control thread only hands the change over and answers the PUT
// when `done` says the write is durable.
//
// Changes that arrive while a write is under way wait and then go together
// in the next write: one read and one atomic replacement of the file
// (config::write_file_atomically) for all of them, edited in one pass
// (policy::with_consumers). The queue holds at most one change per admin
// connection (each waits for its answer), so it is bounded by them.
//
// Thread-safety: submit() from any thread; `done` runs on the writer
// thread (post it where it belongs). The destructor writes what is queued,
// then joins the thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace sluice::http {

class ConsumersWriter {
 public:
  // Replaces `path` with `text`, or says why not in `error`
  // (config::write_file_atomically; tests pass one that waits).
  using WriteFile =
      std::function<bool(const std::string& path, std::string_view text, std::string* error)>;
  struct Change {
    std::string file;  // the consumers file
    std::string id;
    std::optional<std::string> plan;  // nullopt: remove the consumer
  };
  // Empty: the file holds the change, durably. Else why it does not (the
  // file is then as it was).
  using Done = std::function<void(const std::string& error)>;

  explicit ConsumersWriter(WriteFile write_file);
  ConsumersWriter();
  ~ConsumersWriter();
  ConsumersWriter(const ConsumersWriter&) = delete;
  ConsumersWriter& operator=(const ConsumersWriter&) = delete;

  // Queues `change`; the thread starts with the first one.
  void submit(Change change, Done done);

 private:
  struct Pending {
    Change change;
    Done done;
  };
  void run();
  // One read and one write per file of the batch.
  void write_batch(std::vector<Pending>& batch);

  WriteFile write_file_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Pending> queue_;  // under mutex_
  bool stopping_ = false;       // under mutex_
  std::thread thread_;          // started by the first submit(), under mutex_
};

}  // namespace sluice::http

#include "http/consumers_writer.h"

#include <algorithm>

#include "config/files.h"
#include "policy/consumers_file.h"

namespace sluice::http {

ConsumersWriter::ConsumersWriter(WriteFile write_file) : write_file_(std::move(write_file)) {}

ConsumersWriter::ConsumersWriter() : ConsumersWriter(&config::write_file_atomically) {}

ConsumersWriter::~ConsumersWriter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ConsumersWriter::submit(Change change, Done done) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Pending{std::move(change), std::move(done)});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

void ConsumersWriter::run() {
  std::vector<Pending> batch;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to write
      batch.swap(queue_);
    }
    write_batch(batch);
    batch.clear();
  }
}

void ConsumersWriter::write_batch(std::vector<Pending>& batch) {
  // Grouped by file, in the order they came (a reload may have named another
  // file while older changes waited).
  std::vector<std::string> files;
  for (const Pending& p : batch) {
    if (std::find(files.begin(), files.end(), p.change.file) == files.end())
      files.push_back(p.change.file);
  }
  for (const std::string& file : files) {
    std::vector<policy::ConsumerEdit> edits;
    for (const Pending& p : batch) {
      if (p.change.file != file) continue;
      edits.push_back(policy::ConsumerEdit{
          p.change.id,
          p.change.plan ? std::optional<std::string_view>(*p.change.plan) : std::nullopt});
    }
    std::string error;
    const std::optional<std::string> text = config::read_small_file(
        file, "the consumers file " + file, policy::kMaxConsumersFileBytes, &error);
    if (text && write_file_(file, policy::with_consumers(*text, edits), &error)) error.clear();
    for (const Pending& p : batch) {
      if (p.change.file == file) p.done(error);
    }
  }
}

}  // namespace sluice::http

// ConsumersWriter (http/consumers_writer.h): the consumers file written on a
// thread of its own; changes queued during a write go together in the next
// one, each answered when it is durable.
#include "http/consumers_writer.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sluice::http {
namespace {

using namespace std::chrono_literals;

TEST(ConsumersWriter, ChangesQueuedDuringAWriteShareTheNextWrite) {
  char templ[] = "/tmp/sluice-consumers-writer-XXXXXX";
  const std::string dir = ::mkdtemp(templ);
  const std::string file = dir + "/consumers.yaml";
  std::ofstream(file) << "# plans\na: free\n";

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> written;  // the text of each write, in order
  bool first_may_finish = false;
  std::vector<std::string> done;  // "<id>:<error>" in the order answered
  {
    ConsumersWriter writer([&](const std::string& path, std::string_view text, std::string*) {
      std::unique_lock lock(mutex);
      written.emplace_back(text);
      changed.notify_all();
      changed.wait(lock, [&] { return first_may_finish; });
      std::ofstream(path) << text;
      return true;
    });
    const auto answer = [&](std::string id) {
      return [&, id](const std::string& error) {
        std::lock_guard lock(mutex);
        done.push_back(id + ":" + error);
        changed.notify_all();
      };
    };
    writer.submit({file, "a", "pro"}, answer("a"));
    {
      std::unique_lock lock(mutex);
      EXPECT_TRUE(changed.wait_for(lock, 10s, [&] { return written.size() == 1; }));
    }
    writer.submit({file, "b", "free"}, answer("b"));
    writer.submit({file, "a", std::nullopt}, answer("a2"));
    writer.submit({file, "c", "pro"}, answer("c"));
    {
      std::unique_lock lock(mutex);
      first_may_finish = true;
      changed.notify_all();
      EXPECT_TRUE(changed.wait_for(lock, 10s, [&] { return done.size() == 4; }));
    }
  }
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0], "# plans\na: pro\n");
  EXPECT_EQ(written[1], "# plans\nb: free\nc: pro\n");
  EXPECT_EQ(done, (std::vector<std::string>{"a:", "b:", "a2:", "c:"}));
  std::remove(file.c_str());
  ::rmdir(dir.c_str());
}

TEST(ConsumersWriter, AFailedWriteAnswersEveryChangeOfItWithTheReason) {
  std::vector<std::string> errors;
  {
    ConsumersWriter writer;
    writer.submit({"/nonexistent-dir/consumers.yaml", "a", "pro"},
                  [&](const std::string& error) { errors.push_back(error); });
  }
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0],
            "cannot open the consumers file /nonexistent-dir/consumers.yaml: No such file or "
            "directory");
}

}  // namespace
}  // namespace sluice::http

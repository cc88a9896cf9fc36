// The consumers file parser (src/policy/consumers_file.h) and the edit that
// PUT /admin/consumers makes to a file's text.
//
// Asserts, for a file that parses: every consumer it lists is found on its
// plan and has a valid id; its own line, written by consumer_line(), parses
// alone to it; with_consumer() moves it to another plan or removes it, adds
// a new consumer, and leaves every other consumer where it was.
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "policy/consumers_file.h"

namespace {

using namespace sluice::policy;

const std::vector<std::string> kPlans = {"free", "pro", "enterprise"};

size_t plan_index(std::string_view name) {
  for (size_t i = 0; i < kPlans.size(); ++i)
    if (kPlans[i] == name) return i;
  return kPlans.size();
}

// Every consumer of `before` but `except` is in `after` on the same plan.
void expect_others_kept(const ConsumerTable& before, const ConsumerTable& after,
                        std::string_view except) {
  before.for_each([&](std::string_view id, uint16_t plan) {
    if (id == except) return;
    FUZZ_CHECK(after.find(id) == plan, "consumer %.*s lost by an edit of another",
               static_cast<int>(id.size()), id.data());
  });
}

ConsumerTable must_parse(const std::string& text, const char* what) {
  ConsumersFile parsed = parse_consumers(text, "edited", kPlans);
  FUZZ_CHECK(parsed.table.has_value(), "%s does not parse: %s", what,
             parsed.errors.empty() ? "" : parsed.errors.front().text().c_str());
  return std::move(*parsed.table);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(sluice::fuzz::text_of(data, size));
  const ConsumersFile parsed = parse_consumers(text, "fuzz", kPlans);
  FUZZ_CHECK(parsed.table.has_value() == parsed.errors.empty(), "a table and errors at once");
  // The errors, then one line saying it stopped there.
  FUZZ_CHECK(parsed.errors.size() <= kMaxConsumersFileErrors + 1, "too many errors");
  if (!parsed.table) return 0;
  const ConsumerTable& table = *parsed.table;
  std::string first_id;
  table.for_each([&](std::string_view id, uint16_t plan) {
    FUZZ_CHECK(valid_consumer_id(id), "an invalid id was accepted");
    FUZZ_CHECK(table.find(id) == plan, "a listed consumer is not found on its plan");
    const ConsumerTable alone = must_parse(consumer_line(id, kPlans.at(plan)) + "\n", "its line");
    FUZZ_CHECK(alone.size() == 1 && alone.find(id) == plan, "its line reads back otherwise");
    if (first_id.empty()) first_id = std::string(id);
  });
  if (!first_id.empty()) {
    const ConsumerTable moved = must_parse(with_consumer(text, first_id, "enterprise"), "a move");
    FUZZ_CHECK(moved.size() == table.size() && moved.find(first_id) == plan_index("enterprise"),
               "the move did not move it");
    expect_others_kept(table, moved, first_id);
    const ConsumerTable removed =
        must_parse(with_consumer(text, first_id, std::nullopt), "removal");
    FUZZ_CHECK(removed.size() + 1 == table.size() && !removed.find(first_id),
               "the removal did not remove it");
    expect_others_kept(table, removed, first_id);
  }
  const std::string added_id = "fuzz:new#\"id\"";
  if (!table.find(added_id)) {
    const ConsumerTable added = must_parse(with_consumer(text, added_id, "pro"), "an addition");
    FUZZ_CHECK(added.size() == table.size() + 1 && added.find(added_id) == plan_index("pro"),
               "the addition did not add it");
    expect_others_kept(table, added, added_id);
  }
  return 0;
}

// The consumers file (src/policy/consumers_file.h): its grammar, the exact
// `file:line:col` of every error, the compact table it builds
// (consumer_table.h), the live directory over it (consumer_directory.h) and
// the line edit that PUT /admin/consumers writes.
#include "policy/consumers_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/consumer_directory.h"

namespace sluice::policy {
namespace {

const std::vector<std::string> kPlans = {"free", "pro", "enterprise"};

ConsumerTable table_of(std::string_view text) {
  ConsumersFile f = parse_consumers(text, "c.yaml", kPlans);
  std::string all;
  for (const config::ConfigError& e : f.errors) all += e.text() + "\n";
  EXPECT_TRUE(f.table.has_value()) << all;
  return f.table ? std::move(*f.table) : ConsumerTable();
}

std::vector<std::string> errors_of(std::string_view text) {
  const ConsumersFile f = parse_consumers(text, "c.yaml", kPlans);
  EXPECT_EQ(f.table.has_value(), f.errors.empty());
  std::vector<std::string> out;
  for (const config::ConfigError& e : f.errors) out.push_back(e.text());
  return out;
}

using Errors = std::vector<std::string>;

TEST(ConsumersFile, EntriesCommentsBlankLinesAndQuotes) {
  const ConsumerTable t = table_of(
      "# customers\n"
      "\n"
      "key-1: free\n"
      "  key-2 :   pro   # upgraded in May\n"
      "\"id:with#colon\": enterprise\n"
      "\"quote\\\"and\\\\slash\": pro\r\n"
      "k\xC3\xA9y: free\n"
      "last:free");  // no blank after ':', no final newline
  EXPECT_EQ(t.size(), 6u);
  EXPECT_EQ(t.find("key-1"), 0);
  EXPECT_EQ(t.find("key-2"), 1);
  EXPECT_EQ(t.find("id:with#colon"), 2);
  EXPECT_EQ(t.find("quote\"and\\slash"), 1);
  EXPECT_EQ(t.find("k\xC3\xA9y"), 0);
  EXPECT_EQ(t.find("last"), 0);
  EXPECT_EQ(t.find("key-3"), std::nullopt);
  EXPECT_EQ(t.find(""), std::nullopt);
  EXPECT_EQ(t.find("key-1 "), std::nullopt);
}

TEST(ConsumersFile, AnEmptyFileIsAnEmptyTable) {
  EXPECT_EQ(table_of("").size(), 0u);
  EXPECT_EQ(table_of("# nobody yet\n\n").size(), 0u);
  EXPECT_EQ(ConsumerTable().find("x"), std::nullopt);
}

TEST(ConsumersFile, EveryErrorAtItsLineAndColumn) {
  EXPECT_EQ(errors_of("a: free\n"
                      "b: prp\n"
                      "c\n"
                      ": pro\n"
                      "d: pro extra\n"
                      "e:\n"
                      "f: # no plan\n"
                      "g h: pro\n"
                      "\"unterminated:pro\n"
                      "\"bad\\n\": pro\n"
                      "\"\": pro\n"
                      "\"sp ace\": pro\n"
                      "a: pro\n"
                      "\x01x: pro\n"
                      "i: Free\n"),
            (Errors{
                "c.yaml:2:4: unknown plan \"prp\"; did you mean `pro`?",
                "c.yaml:3:2: expected ':' and a plan after the consumer id",
                "c.yaml:4:1: the consumer id is missing before ':'",
                "c.yaml:5:8: unexpected text after the plan (one `<consumer id>: <plan>` per line)",
                "c.yaml:6:3: the plan is missing after ':'",
                "c.yaml:7:4: the plan is missing after ':'",
                "c.yaml:8:3: expected ':' after the consumer id, got 'h' (quote ids that hold "
                "':', '#', '\"' or '\\')",
                "c.yaml:9:1: the quoted id has no closing '\"'",
                "c.yaml:10:5: a quoted id knows only the escapes \\\" and \\\\",
                "c.yaml:11:1: a consumer id must not be empty",
                "c.yaml:12:4: a consumer id holds no whitespace or control bytes, got byte 0x20",
                "c.yaml:13:1: consumer \"a\" is listed twice (first at line 1)",
                "c.yaml:14:1: a consumer id cannot start with byte 0x01 (quote ids that hold ':', "
                "'#', '\"' or '\\')",
                "c.yaml:15:4: unknown plan \"Free\"; did you mean `free`?",
            }));
}

TEST(ConsumersFile, AnUnlikePlanNameListsThePlans) {
  EXPECT_EQ(errors_of("a: platinum\n"),
            (Errors{"c.yaml:1:4: unknown plan \"platinum\" (plans: free, pro, enterprise)"}));
}

TEST(ConsumersFile, AnIdLongerThan1024BytesIsRefused) {
  EXPECT_EQ(table_of(std::string(1024, 'x') + ": free\n").size(), 1u);
  EXPECT_EQ(errors_of(std::string(1025, 'x') + ": free\n"),
            (Errors{"c.yaml:1:1: a consumer id is at most 1024 bytes, this one has 1025"}));
}

TEST(ConsumersFile, ABrokenFileStopsAfterAHundredErrors) {
  std::string text;
  for (int i = 0; i < 150; ++i) text += "x" + std::to_string(i) + "\n";
  const Errors errors = errors_of(text);
  ASSERT_EQ(errors.size(), 101u);
  EXPECT_EQ(errors[99], "c.yaml:100:4: expected ':' and a plan after the consumer id");
  EXPECT_EQ(errors[100], "c.yaml:101:1: stopped after 100 errors; fix those first");
}

TEST(ConsumersFile, ReadingAMissingFileSaysSo) {
  const ConsumersFile f = read_consumers_file("/nonexistent/consumers.yaml", kPlans);
  ASSERT_EQ(f.errors.size(), 1u);
  EXPECT_EQ(f.errors[0].text(),
            "/nonexistent/consumers.yaml: cannot open the consumers file "
            "/nonexistent/consumers.yaml: No such file or directory");
}

TEST(ConsumerTable, ManyConsumersAllFoundAndCompact) {
  ConsumerTable::Builder builder;  // no size given: grows as it goes
  for (int i = 0; i < 50'000; ++i) {
    ASSERT_TRUE(builder.add("consumer-" + std::to_string(i), static_cast<uint16_t>(i % 3)));
  }
  EXPECT_FALSE(builder.add("consumer-7", 2));
  const ConsumerTable t = std::move(builder).build();
  ASSERT_EQ(t.size(), 50'000u);
  for (int i = 0; i < 50'000; ++i) {
    ASSERT_EQ(t.find("consumer-" + std::to_string(i)), i % 3) << i;
  }
  EXPECT_EQ(t.find("consumer-50000"), std::nullopt);
  // ~15 bytes of id, 8 of entry, at most 16 of slots (plus the growth slack).
  EXPECT_LT(t.memory_bytes() / t.size(), 48u);
}

TEST(ConsumerTable, EqualMeansTheSameConsumersOnTheSamePlans) {
  EXPECT_EQ(table_of("a: free\nb: pro\n"), table_of("b: pro\n# x\na: free\n"));
  EXPECT_FALSE(table_of("a: free\nb: pro\n") == table_of("a: free\nb: free\n"));
  EXPECT_FALSE(table_of("a: free\n") == table_of("a: free\nb: free\n"));
}

TEST(ConsumerDirectory, ChangesApplyAtOnceAndFoldIntoTheTable) {
  ConsumerDirectory d(std::make_shared<const ConsumerTable>(table_of("a: free\nb: pro\n")), 8);
  EXPECT_EQ(d.find("a"), 0);
  d.set("a", 2);
  d.set("c", 1);
  d.set("b", std::nullopt);
  EXPECT_EQ(d.find("a"), 2);
  EXPECT_EQ(d.find("b"), std::nullopt);
  EXPECT_EQ(d.find("c"), 1);
  EXPECT_EQ(d.size(), 2u);
  // Past 8 changes they are folded into a new table; all still hold.
  for (int i = 0; i < 20; ++i) d.set("n" + std::to_string(i), static_cast<uint16_t>(i % 3));
  EXPECT_EQ(d.size(), 22u);
  EXPECT_EQ(d.find("a"), 2);
  EXPECT_EQ(d.find("b"), std::nullopt);
  EXPECT_EQ(d.find("n19"), 19 % 3);
  EXPECT_EQ(d.find("n0"), 0);
}

TEST(ConsumersFile, WithConsumerEditsOneLineAndKeepsTheRest) {
  const std::string text = "# tiers\na: free   # trial\nb: pro\n";
  EXPECT_EQ(with_consumer(text, "a", "pro"), "# tiers\na: pro\nb: pro\n");
  EXPECT_EQ(with_consumer(text, "c", "free"), "# tiers\na: free   # trial\nb: pro\nc: free\n");
  EXPECT_EQ(with_consumer(text, "b", std::nullopt), "# tiers\na: free   # trial\n");
  EXPECT_EQ(with_consumer("a: free", "b", "pro"), "a: free\nb: pro\n");
  EXPECT_EQ(with_consumer("", "x:y", "pro"), "\"x:y\": pro\n");
  EXPECT_EQ(with_consumer("\"x:y\": free\n", "x:y", "pro"), "\"x:y\": pro\n");
}

TEST(ConsumersFile, WithConsumersMakesABatchOfEditsInOnePass) {
  const std::string text = "# tiers\na: free   # trial\nb: pro\nb: free\n";
  const ConsumerEdit edits[] = {{"c", "pro"},  {"a", "pro"},        {"b", std::nullopt},
                                {"d", "free"}, {"c", std::nullopt}, {"a", "free"},
                                {"e", "pro"}};
  // The last edit of an id wins; a removed id loses every line it had.
  EXPECT_EQ(with_consumers(text, edits), "# tiers\na: free\nd: free\ne: pro\n");
  EXPECT_EQ(with_consumers(text, {}), text);
}

TEST(ConsumersFile, ConsumerLinesReadBackAsTheirId) {
  for (const std::string id : {"plain", "a:b", "#hash", "q\"uote", "back\\slash", "-dash", "*"}) {
    const ConsumerTable t = table_of(consumer_line(id, "pro") + "\n");
    EXPECT_EQ(t.find(id), 1) << consumer_line(id, "pro");
  }
  EXPECT_EQ(consumer_line("plain", "pro"), "plain: pro");
  EXPECT_EQ(consumer_line("a:b", "pro"), "\"a:b\": pro");
  EXPECT_TRUE(valid_consumer_id("k-1"));
  EXPECT_FALSE(valid_consumer_id(""));
  EXPECT_FALSE(valid_consumer_id("a b"));
  EXPECT_FALSE(valid_consumer_id("a\tb"));
  EXPECT_FALSE(valid_consumer_id(std::string(1025, 'x')));
}

}  // namespace
}  // namespace sluice::policy

// Reading a response's actual cost as it passes (src/policy/usage_reader.h):
// a header or trailer, a JSON body's field, a text/event-stream's last event
// that carries it; fed in pieces of every size.
#include "policy/usage_reader.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

namespace sluice::policy {
namespace {

RouteCost json_cost(std::string_view path) {
  RouteCost c;
  c.json_path = *parse_json_path(path);
  return c;
}

RouteCost header_cost(std::string name) {
  RouteCost c;
  c.header = std::move(name);
  return c;
}

// The figure of `body` fed in pieces of `piece` bytes.
std::optional<uint64_t> read(const RouteCost& cost, std::string_view content_type,
                             std::string_view body, size_t piece) {
  UsageReader reader(cost);
  reader.on_header(content_type, std::nullopt);
  for (size_t i = 0; i < body.size(); i += piece) reader.on_body(body.substr(i, piece));
  return reader.finish(std::nullopt);
}

// The same figure whatever the pieces: one byte at a time, a few, all at once.
std::optional<uint64_t> read_every_way(const RouteCost& cost, std::string_view content_type,
                                       std::string_view body) {
  const std::optional<uint64_t> whole = read(cost, content_type, body, body.size() + 1);
  for (size_t piece : {1, 2, 3, 7}) {
    EXPECT_EQ(read(cost, content_type, body, piece), whole) << "in pieces of " << piece;
  }
  return whole;
}

TEST(Figure, OnlyWholeNumbersUpToTwoToThe32Count) {
  EXPECT_EQ(parse_figure("734"), 734u);
  EXPECT_EQ(parse_figure(" 0\t"), 0u);
  EXPECT_EQ(parse_figure("4294967296"), 4294967296u);
  EXPECT_EQ(parse_figure("4294967297"), std::nullopt);
  EXPECT_EQ(parse_figure("99999999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_figure("-5"), std::nullopt);
  EXPECT_EQ(parse_figure("+5"), std::nullopt);
  EXPECT_EQ(parse_figure("1.5"), std::nullopt);
  EXPECT_EQ(parse_figure("1e3"), std::nullopt);
  EXPECT_EQ(parse_figure(""), std::nullopt);
  EXPECT_EQ(parse_figure("12 tokens"), std::nullopt);
}

TEST(JsonPath, IsNamesSeparatedByDots) {
  EXPECT_EQ(*parse_json_path("usage.total_tokens"),
            (std::vector<std::string>{"usage", "total_tokens"}));
  EXPECT_EQ(*parse_json_path("x-cost"), (std::vector<std::string>{"x-cost"}));
  EXPECT_EQ(parse_json_path(""), std::nullopt);
  EXPECT_EQ(parse_json_path("usage."), std::nullopt);
  EXPECT_EQ(parse_json_path(".usage"), std::nullopt);
  EXPECT_EQ(parse_json_path("usage..total"), std::nullopt);
  EXPECT_EQ(parse_json_path("choices[0].n"), std::nullopt);
  EXPECT_EQ(parse_json_path("a b"), std::nullopt);
}

TEST(UsageReader, ReadsTheFieldOfAJsonBody) {
  const RouteCost cost = json_cost("usage.total_tokens");
  EXPECT_EQ(
      read_every_way(cost, "application/json",
                     R"({"id":"x","choices":[{"usage":{"total_tokens":1}}],)"
                     R"("usage" : { "prompt_tokens": 9, "total_tokens" : 734 } , "n":[1,2]})"),
      734u);
}

TEST(UsageReader, AFieldOfTheSameNameElsewhereDoesNotCount) {
  const RouteCost cost = json_cost("usage.total_tokens");
  EXPECT_EQ(read_every_way(cost, "application/json",
                           R"({"total_tokens":5,"other":{"usage":{"total_tokens":6}},)"
                           R"("x":[{"usage":{"total_tokens":7}}]})"),
            std::nullopt);
}

TEST(UsageReader, StringsWithBracketsQuotesAndEscapesDoNotConfuseIt) {
  const RouteCost cost = json_cost("usage.total_tokens");
  EXPECT_EQ(read_every_way(cost, "application/json",
                           R"({"text":"}{\"usage\":{\"total_tokens\":1}} \\ \u00e9 [","usage":)"
                           R"({"total_tokens":42,"s":"a\"b"}})"),
            42u);
}

TEST(UsageReader, AMalformedOrTruncatedBodyYieldsNoFigure) {
  const RouteCost cost = json_cost("usage.total_tokens");
  EXPECT_EQ(read_every_way(cost, "application/json", R"({"usage":{"total_tokens":42})"),
            std::nullopt);
  EXPECT_EQ(read_every_way(cost, "application/json", R"({"usage":{"total_tokens":42}}x)"),
            std::nullopt);
  EXPECT_EQ(read_every_way(cost, "application/json", R"({"usage":{"total_tokens":42,}})"),
            std::nullopt);
  EXPECT_EQ(read_every_way(cost, "text/html", "<html>usage</html>"), std::nullopt);
  EXPECT_EQ(read_every_way(cost, "application/json", ""), std::nullopt);
}

TEST(UsageReader, AValueThatIsNotAUsableFigureYieldsNone) {
  const RouteCost cost = json_cost("usage.total_tokens");
  for (const char* value :
       {"-3", "1.5", "2e3", "\"12\"", "null", "true", "{}", "[1]", "4294967297"}) {
    EXPECT_EQ(read_every_way(cost, "application/json",
                             std::string(R"({"usage":{"total_tokens":)") + value + "}}"),
              std::nullopt)
        << value;
  }
}

TEST(UsageReader, ADocumentDeeperThanTheBoundYieldsNoFigure) {
  const RouteCost cost = json_cost("usage.total_tokens");
  const std::string deep = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(
      read_every_way(cost, "application/json", R"({"usage":{"total_tokens":5},"x":)" + deep + "}"),
      std::nullopt);
}

TEST(UsageReader, ReadsTheLastEventOfAnEventStreamThatCarriesTheField) {
  const RouteCost cost = json_cost("usage.total_tokens");
  const std::string stream =
      ": a comment\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}],\"usage\":null}\n\n"
      "event: message\r\n"
      "data: {\"usage\":{\"total_tokens\":\r\n"
      "data: 17}}\r\n\r\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"total_tokens\":20}}\r\r"
      "data: {\"choices\":[{\"delta\":{}}]}\n\n"
      "data: [DONE]\n\n";
  EXPECT_EQ(read_every_way(cost, "text/event-stream; charset=utf-8", stream), 20u);
}

TEST(UsageReader, AnEventTheStreamDidNotEndIsNotCounted) {
  const RouteCost cost = json_cost("usage.total_tokens");
  EXPECT_EQ(read_every_way(cost, "text/event-stream",
                           "data: {\"usage\":{\"total_tokens\":5}}\n\n"
                           "data: {\"usage\":{\"total_tokens\":9}}\n"),
            5u);
  EXPECT_EQ(read_every_way(cost, "text/event-stream", "data: [DONE]\n\n"), std::nullopt);
}

TEST(UsageReader, TakesAHeaderAndATrailerSaysTheLastWord) {
  const RouteCost cost = header_cost("x-usage");
  {
    UsageReader reader(cost);
    reader.on_header("application/json", "120");
    reader.on_body("{not json at all");
    EXPECT_EQ(reader.finish(std::nullopt), 120u);
  }
  {
    UsageReader reader(cost);
    reader.on_header("text/plain", std::nullopt);
    EXPECT_EQ(reader.finish("77"), 77u);
  }
  {
    UsageReader reader(cost);
    reader.on_header("text/plain", "5");
    EXPECT_EQ(reader.finish("-1"), 5u);  // an unusable trailer leaves the header's figure
  }
  {
    UsageReader reader(cost);
    reader.on_header("text/plain", "lots");
    EXPECT_EQ(reader.finish(std::nullopt), std::nullopt);
  }
}

}  // namespace
}  // namespace sluice::policy

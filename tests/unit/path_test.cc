#include <gtest/gtest.h>

#include <random>
#include <string>

#include "policy/path.h"

namespace sluice::policy {
namespace {

std::string norm(std::string_view target) {
  return normalize_path(target, false);
}
std::string norm_ci(std::string_view target) {
  return normalize_path(target, true);
}

TEST(NormalizePath, PlainPathsAreUnchanged) {
  EXPECT_EQ(norm("/"), "/");
  EXPECT_EQ(norm("/api/users"), "/api/users");
  EXPECT_EQ(norm("/api/users/42"), "/api/users/42");
}

TEST(NormalizePath, TrailingSlashIsDropped) {
  EXPECT_EQ(norm("/api/users/"), "/api/users");
  EXPECT_EQ(norm("/api/users///"), "/api/users");
}

TEST(NormalizePath, RepeatedSlashesAreMerged) {
  EXPECT_EQ(norm("//api///users"), "/api/users");
  EXPECT_EQ(norm("//"), "/");
  EXPECT_EQ(norm("////"), "/");
}

TEST(NormalizePath, DotSegmentsVanish) {
  EXPECT_EQ(norm("/api/./users"), "/api/users");
  EXPECT_EQ(norm("/./api/."), "/api");
  EXPECT_EQ(norm("/."), "/");
}

TEST(NormalizePath, DotDotRemovesTheParent) {
  EXPECT_EQ(norm("/api/x/../users"), "/api/users");
  EXPECT_EQ(norm("/api/x/y/../../users"), "/api/users");
  EXPECT_EQ(norm("/api/.."), "/");
  EXPECT_EQ(norm("/api/users/.."), "/api");
}

TEST(NormalizePath, DotDotNeverGoesAboveTheRoot) {
  EXPECT_EQ(norm("/.."), "/");
  EXPECT_EQ(norm("/../../api"), "/api");
  EXPECT_EQ(norm("/a/b/../../../../c"), "/c");
}

TEST(NormalizePath, OtherDotSpellingsAreOrdinarySegments) {
  EXPECT_EQ(norm("/a/.../b"), "/a/.../b");
  EXPECT_EQ(norm("/a/..b/c."), "/a/..b/c.");
  EXPECT_EQ(norm("/a/.hidden"), "/a/.hidden");
}

TEST(NormalizePath, UnreservedEscapesAreDecoded) {
  EXPECT_EQ(norm("/api/%75sers"), "/api/users");
  EXPECT_EQ(norm("/%61"), "/a");
  EXPECT_EQ(norm("/%7E"), "/~");
  EXPECT_EQ(norm("/%7e"), "/~");
  EXPECT_EQ(norm("/%2D%2e%5F%31%5a"), "/-._1Z");
}

TEST(NormalizePath, EncodedDotsAreDotSegments) {
  EXPECT_EQ(norm("/api/%2e%2E/users"), "/users");
  EXPECT_EQ(norm("/api/%2E/users"), "/api/users");
  EXPECT_EQ(norm("/api/.%2e/users"), "/users");
}

TEST(NormalizePath, OtherEscapesAreUpperCasedNotDecoded) {
  EXPECT_EQ(norm("/a%2fb"), "/a%2Fb");
  EXPECT_EQ(norm("/a%2Fb"), "/a%2Fb");
  EXPECT_NE(norm("/a%2Fb"), norm("/a/b"));  // an encoded slash is not a separator
  EXPECT_EQ(norm("/%c3%a9"), "/%C3%A9");
  EXPECT_EQ(norm("/a%3fb"), "/a%3Fb");
  EXPECT_EQ(norm("/100%25"), "/100%25");
}

TEST(NormalizePath, QueryAndFragmentAreDropped) {
  EXPECT_EQ(norm("/api/users?x=1"), "/api/users");
  EXPECT_EQ(norm("/api/users#top"), "/api/users");
  EXPECT_EQ(norm("/api/users/?a=/../b#c"), "/api/users");
  EXPECT_EQ(norm("/api/users?"), "/api/users");
  EXPECT_EQ(norm("?x=1"), "/");
  EXPECT_EQ(norm("/a#b?c"), "/a");
}

TEST(NormalizePath, AbsoluteFormIsReducedToThePath) {
  EXPECT_EQ(norm("http://example.com/api/users?x=1"), "/api/users");
  EXPECT_EQ(norm("HTTPS://example.com:8443//api/./users/"), "/api/users");
  EXPECT_EQ(norm("http://example.com"), "/");
  EXPECT_EQ(norm("http://example.com?x=/api"), "/");
  EXPECT_EQ(norm("http://user@example.com#/x"), "/");
}

TEST(NormalizePath, RawUnsafeBytesBecomeEscapes) {
  EXPECT_EQ(norm("/a b"), "/a%20b");
  EXPECT_EQ(norm("/a b"), norm("/a%20b"));
  EXPECT_EQ(norm(std::string("/a\0b", 4)), "/a%00b");
  EXPECT_EQ(norm("/a\\b"), "/a%5Cb");
  EXPECT_EQ(norm("/\xc3\xa9"), "/%C3%A9");
  EXPECT_EQ(norm("/\xc3\xa9"), norm("/%c3%a9"));
}

TEST(NormalizePath, SubDelimitersColonAndAtStayRaw) {
  PathReading keep;
  keep.strip_matrix_params = false;
  EXPECT_EQ(normalize_path("/a;b=c,d/e:f@g!$&'()*+", keep), "/a;b=c,d/e:f@g!$&'()*+");
  EXPECT_EQ(norm("/a,d/e:f@g!$&'()*+"), "/a,d/e:f@g!$&'()*+");
}

// What each spelling normalises to, and whether it is refused, with the
// default reading and with each `paths:` option.
struct Spelling {
  std::string_view target;
  std::string_view path;
  bool refused;
};

void expect_spellings(const PathReading& reading, std::initializer_list<Spelling> spellings) {
  for (const Spelling& s : spellings) {
    bool refused = !s.refused;
    EXPECT_EQ(normalize_path(s.target, reading, &refused), s.path) << s.target;
    EXPECT_EQ(refused, s.refused) << s.target;
  }
}

TEST(NormalizePath, MatrixParametersAreStrippedAsTomcatDoes) {
  expect_spellings(PathReading{}, {
                                      {"/api/auth/login;jsessionid=1", "/api/auth/login", false},
                                      {"/api;x=1/auth/login", "/api/auth/login", false},
                                      {"/api/auth/login;", "/api/auth/login", false},
                                      {"/api/x/..;y/auth/login", "/api/auth/login", false},
                                      {"/api/auth/login;a%2Fb", "/api/auth/login", true},
                                      {"/api/auth/login%3Bx", "/api/auth/login%3Bx", false},
                                      {"/;x", "/", false},
                                  });
  PathReading keep;
  keep.strip_matrix_params = false;
  expect_spellings(keep, {{"/api/auth/login;x=1", "/api/auth/login;x=1", false}});
}

TEST(NormalizePath, NulAndEscapesThatAreNotUtf8AreRefused) {
  expect_spellings(PathReading{},
                   {
                       {"/a%00b", "/a%00b", true},
                       {std::string_view("/a\0b", 4), "/a%00b", true},
                       {"/a%C0%AFb", "/a%C0%AFb", true},        // overlong '/'
                       {"/a%E0%80%AFb", "/a%E0%80%AFb", true},  // overlong '/'
                       {"/a%C3b", "/a%C3b", true},              // cut short
                       {"/a%C3%A9b", "/a%C3%A9b", false},       // e acute
                       {"/\xc3\xa9", "/%C3%A9", false},
                       {"/a%ED%A0%80", "/a%ED%A0%80", true},  // a surrogate
                       {"/\x81\x81", "/%81%81", true},        // raw bytes are read as their escapes
                   });
}

TEST(NormalizePath, EscapedSlashesAndBackslashesAsConfigured) {
  PathReading decode;
  decode.escaped_slashes = PathReading::EscapedSlashes::kDecode;
  expect_spellings(decode, {
                               {"/api%2Fauth%2flogin", "/api/auth/login", false},
                               {"/api%2F..%2Fadmin", "/admin", false},
                               {"/api%5Cauth", "/api%5Cauth", true},  // a backslash: rejected
                           });
  PathReading keep;
  keep.escaped_slashes = PathReading::EscapedSlashes::kKeep;
  expect_spellings(keep, {
                             {"/api%2Fauth", "/api%2Fauth", false},
                             {"/api%5cauth", "/api%5Cauth", false},
                             {"/api\\auth", "/api%5Cauth", true},  // raw: the backslash rule
                         });
  PathReading slash;
  slash.backslash = PathReading::Backslash::kAsSlash;
  expect_spellings(slash, {
                              {"/api\\auth\\login", "/api/auth/login", false},
                              {"/api%5Cauth", "/api%5Cauth", true},  // escaped: still rejected
                          });
  slash.escaped_slashes = PathReading::EscapedSlashes::kDecode;
  expect_spellings(slash, {{"/api%5Cauth%2Flogin", "/api/auth/login", false}});
}

TEST(NormalizePath, PathIsCaseSensitiveByDefault) {
  EXPECT_EQ(norm("/API/Users"), "/API/Users");
  EXPECT_EQ(norm("/%41"), "/A");
}

TEST(NormalizePath, CaseInsensitiveLowerCasesLettersNotEscapes) {
  EXPECT_EQ(norm_ci("/API/Users"), "/api/users");
  EXPECT_EQ(norm_ci("/%41%42c"), "/abc");
  EXPECT_EQ(norm_ci("/a%2fB"), "/a%2Fb");
  EXPECT_EQ(norm_ci("/%C3%89"), "/%C3%89");  // É stays É: only ASCII folds
  EXPECT_EQ(norm_ci("HTTP://Example.COM/X"), "/x");
}

TEST(NormalizePath, EverySpellingOfOneResourceIsOnePath) {
  const std::string canonical = "/api/users";
  for (std::string_view variant :
       {"/api/users", "/api/users/", "//api//users", "/api/./users", "/api/x/../users",
        "/api/%75sers", "/%61pi/users", "/api/users?page=2", "/api/users#x",
        "//api/./x/..//%75sers/?q=1#f", "/./api/%2e/users//", "/../api/users",
        "http://h/api/users/", "/api/users/.", "/api/users/x/.."}) {
    EXPECT_EQ(norm(variant), canonical) << variant;
  }
  for (std::string_view variant : {"/API/Users", "/Api/%55SERS/", "//api/./X/..//%75sers"}) {
    EXPECT_EQ(norm_ci(variant), canonical) << variant;
  }
}

TEST(NormalizePath, HostileInputsNeverCrash) {
  EXPECT_EQ(norm(""), "/");
  EXPECT_EQ(norm("%"), "/%25");
  EXPECT_EQ(norm("/%"), "/%25");
  EXPECT_EQ(norm("/%zz"), "/%25zz");
  EXPECT_EQ(norm("/%4"), "/%254");
  EXPECT_EQ(norm("/a%"), norm("/a%25"));
  EXPECT_EQ(norm("*"), "/*");
  EXPECT_EQ(norm(std::string(5, '\0')), "/%00%00%00%00%00");
  EXPECT_EQ(norm(std::string(1000, '/')), "/");
  std::string dots;
  for (int i = 0; i < 100000; ++i) dots += "/..";
  EXPECT_EQ(norm(dots + "/x"), "/x");
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "/a";
  EXPECT_EQ(norm(deep).size(), deep.size());
  const std::string escapes(300000, '%');
  EXPECT_EQ(norm(escapes).size(), 1 + 3 * escapes.size());
}

// Seeded random targets over a hostile alphabet: the result always starts
// with '/', has no empty, "." or ".." segment, no trailing slash, no query,
// and normalising it again changes nothing.
TEST(NormalizePath, RandomTargetsGiveCanonicalIdempotentPaths) {
  const std::string alphabet = std::string("/.%?#aA2fF~ \\", 13) + std::string(1, '\0') + "\xff";
  std::mt19937 rng(12345);
  for (int round = 0; round < 5000; ++round) {
    std::string target;
    const size_t length = rng() % 40;
    for (size_t i = 0; i < length; ++i) target += alphabet[rng() % alphabet.size()];
    for (bool ci : {false, true}) {
      const std::string out = normalize_path(target, ci);
      ASSERT_FALSE(out.empty());
      ASSERT_EQ(out.front(), '/') << target;
      ASSERT_EQ(normalize_path(out, ci), out) << target;
      if (out != "/") {
        ASSERT_NE(out.back(), '/') << target;
      }
      ASSERT_EQ(out.find("//"), std::string::npos) << target;
      ASSERT_EQ(out.find_first_of(std::string("?# \\\0", 5)), std::string::npos) << target;
      ASSERT_EQ((out + "/").find("/./"), std::string::npos) << target;
      ASSERT_EQ((out + "/").find("/../"), std::string::npos) << target;
    }
  }
}

// Frameworks read these as separators where this normalisation cannot (the
// escape stays an escape): the caller must refuse them.
TEST(NormalizePath, EncodedSlashesAndBackslashesAreFlagged) {
  for (const std::string_view target :
       {"/a%2Fb", "/a%2fb", "/a%5Cb", "/a%5cb", "/a\\b", "%2F", "/a/b%2F"}) {
    bool flagged = false;
    normalize_path(target, false, &flagged);
    EXPECT_TRUE(flagged) << target;
  }
  for (const std::string_view target :
       {"/a/b", "/a%252Fb", "/a?x=%2F", "/a#%5C", "/a%2Eb", "/a%20b"}) {
    bool flagged = true;
    normalize_path(target, false, &flagged);
    EXPECT_FALSE(flagged) << target;
  }
  // The path itself keeps the escape (upper-cased), as before.
  EXPECT_EQ(norm("/a%2fb"), "/a%2Fb");
}

}  // namespace
}  // namespace sluice::policy

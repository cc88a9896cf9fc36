// JWT verification (src/policy/jwt.h): the bearer tokens every request of a
// `jwt:CLAIM` route carries, and the JWKS documents a config names.
//
// Input: "<token>" for the HS256 verifier and for a JWKS verifier, and the
// whole input as a JWKS document. Asserts, beyond no crash:
//   - a token whose signature part is replaced by garbage never verifies
//     (the claim comes only from a verified token);
//   - a claim read from a verified token is never empty;
//   - a JWKS that loads has at least one key.
#include <memory>
#include <string>

#include "fuzz_check.h"
#include "policy/jwt.h"

namespace {

using namespace sluice::policy;

constexpr int64_t kNow = 1'700'000'000;

std::shared_ptr<const JwtVerifier> secret_verifier() {
  JwtSettings s;
  s.secret_file = "fuzz.secret";
  s.secret = "fuzz-secret";
  s.issuer = "iss";
  return JwtVerifier::make(s).value();
}

// The P-256 key of RFC 7515 appendix A.3 (the seed corpus holds its example token).
std::shared_ptr<const JwtVerifier> jwks_verifier() {
  JwtSettings s;
  s.jwks_file = "fuzz.jwks";
  s.jwks = R"({"keys":[{"kty":"EC","crv":"P-256","kid":"k",)"
           R"("x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",)"
           R"("y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]})";
  return JwtVerifier::make(s).value();
}

void check_token(const JwtVerifier& v, std::string_view token) {
  for (const char* claim : {"sub", "tenant", "exp"}) {
    const std::optional<std::string> value = v.claim(token, claim, kNow);
    FUZZ_CHECK(!value || !value->empty(), "an empty claim %s", claim);
  }
  // The same token with its signature replaced verifies for no claim.
  const size_t last_dot = token.rfind('.');
  if (last_dot == std::string_view::npos) return;
  const std::string forged = std::string(token.substr(0, last_dot)) + ".AAAA";
  FUZZ_CHECK(!v.claim(forged, "sub", kNow), "a token with signature AAAA verified");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const JwtVerifier> by_secret = secret_verifier();
  static const std::shared_ptr<const JwtVerifier> by_jwks = jwks_verifier();
  const std::string_view input = sluice::fuzz::text_of(data, size);
  check_token(*by_secret, input);
  check_token(*by_jwks, input);

  JwtSettings s;
  s.jwks_file = "input.jwks";
  s.jwks = std::string(input);
  const auto loaded = JwtVerifier::make(s);
  if (loaded.ok()) FUZZ_CHECK((*loaded)->key_count() > 0, "a JWKS loaded without a key");
  return 0;
}

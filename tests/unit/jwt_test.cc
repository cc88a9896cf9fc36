// policy/jwt.h: which tokens verify, and what a claim reads as.
#include "policy/jwt.h"

#include <gtest/gtest.h>

#include <string>

#include "jwt_tokens.h"

namespace sluice::policy {
namespace {

using test::base64url;
using test::hs256_token;
using test::SigningKey;

constexpr int64_t kNow = 1'700'000'000;
const std::string kSecret = "s3cret-for-tests-only";

std::shared_ptr<const JwtVerifier> secret_verifier(std::string issuer = "",
                                                   std::string audience = "") {
  JwtSettings s;
  s.secret_file = "/etc/sluice/jwt.secret";
  s.secret = kSecret;
  s.issuer = std::move(issuer);
  s.audience = std::move(audience);
  return JwtVerifier::make(s).value();
}

Result<std::shared_ptr<const JwtVerifier>> jwks_verifier(const std::string& jwks) {
  JwtSettings s;
  s.jwks_file = "/etc/sluice/jwks.json";
  s.jwks = jwks;
  return JwtVerifier::make(s);
}

TEST(Jwt, Hs256ClaimsReadAsTextWhenTheTokenVerifies) {
  const auto v = secret_verifier();
  const std::string token =
      hs256_token(kSecret, R"({"sub":"alice","tenant":42,"admin":true,"exp":1700000060})");
  EXPECT_EQ(v->claim(token, "sub", kNow), "alice");
  EXPECT_EQ(v->claim(token, "tenant", kNow), "42");
  EXPECT_EQ(v->claim(token, "admin", kNow), "true");
  EXPECT_EQ(v->claim(token, "email", kNow), std::nullopt);
  const std::string odd = hs256_token(kSecret, R"({"sub":"","obj":{"a":1},"arr":[1],"nul":null})");
  for (const char* name : {"sub", "obj", "arr", "nul"}) {
    EXPECT_EQ(v->claim(odd, name, kNow), std::nullopt) << name;
  }
}

TEST(Jwt, ATokenThatDoesNotVerifyGivesNoClaim) {
  const auto v = secret_verifier();
  const std::string payload = R"({"sub":"alice"})";
  EXPECT_EQ(v->claim(hs256_token("another secret", payload), "sub", kNow), std::nullopt);
  // The payload changed after signing: the claim is forged.
  const std::string good = hs256_token(kSecret, payload);
  const size_t dot1 = good.find('.');
  const size_t dot2 = good.find('.', dot1 + 1);
  const std::string forged =
      good.substr(0, dot1 + 1) + base64url(R"({"sub":"mallory"})") + good.substr(dot2);
  EXPECT_EQ(v->claim(forged, "sub", kNow), std::nullopt);
  // alg none, with or without a signature, and algorithms not configured.
  const std::string none_part = base64url(R"({"alg":"none"})") + "." + base64url(payload);
  EXPECT_EQ(v->claim(none_part + ".", "sub", kNow), std::nullopt);
  EXPECT_EQ(v->claim(none_part + "." + good.substr(dot2 + 1), "sub", kNow), std::nullopt);
  EXPECT_EQ(v->claim(hs256_token(kSecret, payload, R"({"alg":"HS512"})"), "sub", kNow),
            std::nullopt);
  // Not three base64url parts, or not JSON.
  for (const std::string& bad :
       {std::string(), std::string("a.b"), good + ".x", std::string("..."), std::string("!.!.!"),
        base64url("[]") + "." + base64url(payload) + "." + good.substr(dot2 + 1)}) {
    EXPECT_EQ(v->claim(bad, "sub", kNow), std::nullopt) << bad;
  }
}

TEST(Jwt, ExpiryAndNotBeforeAreCheckedAgainstNow) {
  const auto v = secret_verifier();
  auto claim_at = [&](const std::string& payload, int64_t now) {
    return v->claim(hs256_token(kSecret, payload), "sub", now);
  };
  EXPECT_EQ(claim_at(R"({"sub":"a","exp":1700000001})", kNow), "a");
  EXPECT_EQ(claim_at(R"({"sub":"a","exp":1700000000})", kNow), std::nullopt);  // exp is exclusive
  EXPECT_EQ(claim_at(R"({"sub":"a","exp":1700000000.5})", kNow), "a");
  EXPECT_EQ(claim_at(R"({"sub":"a","exp":"tomorrow"})", kNow), std::nullopt);
  EXPECT_EQ(claim_at(R"({"sub":"a","nbf":1700000000})", kNow), "a");
  EXPECT_EQ(claim_at(R"({"sub":"a","nbf":1700000001})", kNow), std::nullopt);
}

TEST(Jwt, AVerifiedTokenIsKeptButItsTimeIsCheckedAtEveryUse) {
  const auto v = secret_verifier();
  const std::string token =
      hs256_token(kSecret, R"({"sub":"a","nbf":1700000000,"exp":1700000010})");
  EXPECT_EQ(v->claim(token, "sub", kNow - 1), std::nullopt);  // not yet
  EXPECT_EQ(v->claim(token, "sub", kNow), "a");
  EXPECT_EQ(v->claim(token, "sub", kNow + 9), "a");
  EXPECT_EQ(v->claim(token, "sub", kNow + 10), std::nullopt);  // expired since
  // Far more tokens than are kept: each still verifies, and the first again.
  const size_t many = 3 * JwtVerifier::kCacheShards * JwtVerifier::kCacheEntriesPerShard;
  for (size_t i = 0; i < many; ++i) {
    const std::string sub = "u" + std::to_string(i);
    ASSERT_EQ(v->claim(hs256_token(kSecret, R"({"sub":")" + sub + R"("})"), "sub", kNow), sub);
  }
  EXPECT_EQ(v->claim(token, "sub", kNow + 5), "a");
}

TEST(Jwt, IssuerAndAudienceWhenConfigured) {
  const auto v = secret_verifier("https://auth.example.com", "api");
  auto sub = [&](const std::string& payload) {
    return v->claim(hs256_token(kSecret, payload), "sub", kNow);
  };
  EXPECT_EQ(sub(R"({"sub":"a","iss":"https://auth.example.com","aud":"api"})"), "a");
  EXPECT_EQ(sub(R"({"sub":"a","iss":"https://auth.example.com","aud":["web","api"]})"), "a");
  EXPECT_EQ(sub(R"({"sub":"a","iss":"https://evil.example","aud":"api"})"), std::nullopt);
  EXPECT_EQ(sub(R"({"sub":"a","iss":"https://auth.example.com","aud":"web"})"), std::nullopt);
  EXPECT_EQ(sub(R"({"sub":"a","iss":"https://auth.example.com"})"), std::nullopt);
  EXPECT_EQ(sub(R"({"sub":"a","aud":"api"})"), std::nullopt);
}

TEST(Jwt, Rs256AndEs256WithTheKeyTheirKidNames) {
  const SigningKey rsa = SigningKey::rsa("r1");
  const SigningKey ec = SigningKey::ec("e1");
  const SigningKey stranger = SigningKey::rsa("r1");  // same kid, not published
  const auto v = jwks_verifier(test::jwks({rsa.jwk(), ec.jwk()}));
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ((*v)->key_count(), 2u);
  const std::string payload = R"({"sub":"bob"})";
  EXPECT_EQ((*v)->claim(rsa.token(payload), "sub", kNow), "bob");
  EXPECT_EQ((*v)->claim(ec.token(payload), "sub", kNow), "bob");
  EXPECT_EQ((*v)->claim(stranger.token(payload), "sub", kNow), std::nullopt);
  // Without a kid every key of the algorithm is tried; a kid no key has fails.
  EXPECT_EQ((*v)->claim(ec.token(payload, R"({"alg":"ES256"})"), "sub", kNow), "bob");
  EXPECT_EQ((*v)->claim(ec.token(payload, R"({"alg":"ES256","kid":"zz"})"), "sub", kNow),
            std::nullopt);
  // An RSA signature presented as ES256 (and the reverse) does not verify.
  EXPECT_EQ((*v)->claim(rsa.token(payload, R"({"alg":"ES256"})"), "sub", kNow), std::nullopt);
  EXPECT_EQ((*v)->claim(ec.token(payload, R"({"alg":"RS256"})"), "sub", kNow), std::nullopt);
  // Key confusion: an HS256 token "signed" with the public JWK as secret.
  EXPECT_EQ((*v)->claim(hs256_token(rsa.jwk(), payload), "sub", kNow), std::nullopt);
}

TEST(Jwt, AJwksThatCannotBeUsedIsRefusedWithTheReason) {
  auto error = [](const std::string& jwks) {
    const auto v = jwks_verifier(jwks);
    return v.ok() ? std::string("ok") : v.error().message;
  };
  EXPECT_EQ(error("{"), "is not JSON (incomplete JSON)");
  EXPECT_EQ(error("[]"), "must be a JWKS: an object with a \"keys\" array");
  EXPECT_EQ(error(R"({"keys":[]})"), "has no signing key");
  EXPECT_EQ(error(R"({"keys":[{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"}]})"),
            "has no signing key");
  EXPECT_EQ(error(R"({"keys":[1]})"), "has a bad key 1: not an object");
  EXPECT_EQ(error(R"({"keys":[{"kty":"oct","k":"c2VjcmV0"}]})"),
            "has a bad key 1: \"kty\": \"oct\"; RSA (RS256) and EC (ES256) keys are supported");
  EXPECT_EQ(error(R"({"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]})"),
            "has a bad key 1: an RSA key shorter than 2048 bits is refused");
  EXPECT_EQ(error(R"({"keys":[{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}]})"),
            "has a bad key 1: an EC key must be on \"crv\": \"P-256\" (ES256)");
  const std::string zero = base64url(std::string(32, '\0'));
  EXPECT_EQ(
      error(R"({"keys":[{"kty":"EC","crv":"P-256","x":")" + zero + R"(","y":")" + zero + R"("}]})"),
      "has a bad key 1: OpenSSL refused the EC key (not a point on P-256?)");
  const SigningKey rsa = SigningKey::rsa("r1");
  std::string mislabelled = rsa.jwk();
  mislabelled.replace(mislabelled.find("RS256"), 5, "ES256");
  EXPECT_EQ(error(test::jwks({mislabelled})),
            "has a bad key 1: \"alg\": \"ES256\" does not fit its key (RS256)");
}

TEST(Jwt, BearerTokenOfAnAuthorizationValue) {
  EXPECT_EQ(bearer_token("Bearer abc.def.ghi"), "abc.def.ghi");
  EXPECT_EQ(bearer_token("bearer   abc "), "abc");
  EXPECT_EQ(bearer_token("Basic dXNlcjpwYXNz"), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token(""), "");
}

}  // namespace
}  // namespace sluice::policy

// JSON Web Tokens (RFC 7519) for client keys `jwt:CLAIM`: a claim counts as
// the client's key only when its token verifies, so a client cannot mint
// keys by writing claims.
//
// A token verifies when: it is a compact JWS of three base64url parts; its
// header's `alg` is the one its key is for (HS256 with `secret_file`; RS256
// or ES256 with a key of `jwks_file`, chosen by `kid` when the header names
// one, else every key of that algorithm is tried); the signature checks;
// `exp`, when present, is after now and `nbf`, when present, is not after
// now (no leeway); `iss` equals `issuer` and `aud` (a string or an array)
// holds `audience` when those are configured. `alg: none` and every other
// algorithm are refused, so a token cannot choose a weaker check.
//
// Thread-safety: a JwtVerifier is immutable after make(); claim() may be
// called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/result.h"

namespace sluice::policy {

struct JwtSettings {
  std::string jwks_file;    // resolved path, or "" (then secret_file)
  std::string jwks;         // the JWKS document, read at load and reload
  std::string secret_file;  // resolved path, or "" (then jwks_file)
  std::string secret;       // the HS256 secret, read at load and reload
  std::string issuer;       // "" = not checked
  std::string audience;     // "" = not checked
  friend bool operator==(const JwtSettings&, const JwtSettings&) = default;
};

class JwtVerifier {
 public:
  // The keys of `settings`. Errors: a JWKS that is not JSON, has no usable
  // key (RSA for RS256, EC P-256 for ES256), or a key that OpenSSL refuses;
  // the message says which key and why.
  static Result<std::shared_ptr<const JwtVerifier>> make(const JwtSettings& settings);
  ~JwtVerifier();
  JwtVerifier(const JwtVerifier&) = delete;
  JwtVerifier& operator=(const JwtVerifier&) = delete;

  // The value of claim `name` in `token` when the token verifies at `now_s`
  // (Unix seconds): a string claim as it is, a number or boolean as its JSON
  // text. nullopt when the token does not verify, or the claim is absent,
  // empty, null, an object or an array. Tokens that verified are kept (at
  // most kCacheShards x kCacheEntriesPerShard; exp and nbf are checked at
  // each call), so a client's signature is checked once, not per request.
  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheEntriesPerShard = 256;
  std::optional<std::string> claim(std::string_view token, std::string_view name,
                                   int64_t now_s) const;

  // Keys loaded (for the startup log).
  size_t key_count() const;

 private:
  struct Key;
  JwtVerifier() = default;
  bool signature_ok(std::string_view alg, std::string_view kid, std::string_view signed_part,
                    std::string_view signature) const;

  struct Verified {
    double expires = std::numeric_limits<double>::infinity();  // exp, else never
    double not_before = -std::numeric_limits<double>::infinity();
    std::map<std::string, std::string, std::less<>> claims;  // scalar claims as text
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct CacheShard {
    std::mutex mutex;
    std::unordered_map<std::string, std::shared_ptr<const Verified>, StringHash, std::equal_to<>>
        tokens;
  };
  std::optional<Verified> verify(std::string_view token) const;

  std::vector<std::unique_ptr<Key>> keys_;
  mutable std::array<CacheShard, kCacheShards> cache_;
  std::string secret_;
  std::string issuer_;
  std::string audience_;
};

// The bearer token of an Authorization header value ("Bearer <token>",
// scheme case-insensitive), or "" when it holds none.
std::string_view bearer_token(std::string_view authorization);

}  // namespace sluice::policy

// The TLS 1.2 cipher suites a Sluice server offers: ECDHE key exchange
// (forward secret) with an AEAD cipher, nothing else. Static-RSA key exchange
// (no forward secrecy) and CBC with SHA-1 (Lucky13-style padding oracles) are
// left out; every client that speaks TLS 1.2 and was updated in the last
// decade has one of these. TLS 1.3 suites are all of this kind and are
// OpenSSL's defaults. The same four AES-GCM suites are the gRPC port's (gRPC's
// own list for TLS 1.2, which has no CBC or static-RSA suite either).
#pragma once

namespace sluice::config {

// For SSL_CTX_set_cipher_list: server preference order, AES-128 first
// (as fast and as strong for this use), ChaCha20 for clients without AES
// instructions.
inline constexpr const char* kTls12CipherSuites =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

}  // namespace sluice::config

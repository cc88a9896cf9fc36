#include "policy/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

namespace sluice::policy {

namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio memory_bio(std::string_view text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// "2026-12-01 23:00:00 UTC", or "" when the time cannot be read.
std::string utc_text(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return "";
  char text[32];
  if (std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) return "";
  return text;
}

// The reason OpenSSL gave last (the queue is emptied: it is per thread and
// would otherwise leak into the next caller's error).
std::string openssl_reason() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "";
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? std::string(" (") + reason + ")" : "";
}

}  // namespace

std::optional<TlsProblem> check_certificate_and_key(std::string_view cert_pem,
                                                    std::string_view key_pem, std::time_t now) {
  ERR_clear_error();
  Bio certs = memory_bio(cert_pem);
  Certificate leaf(PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr));
  if (!leaf) {
    return TlsProblem{false, std::string("holds no PEM certificate (-----BEGIN CERTIFICATE-----)") +
                                 openssl_reason()};
  }
  // The rest of the chain, up to the end of the text: each must parse.
  for (int index = 2;; ++index) {
    Certificate next(PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr));
    if (next) continue;
    const unsigned long code = ERR_peek_last_error();
    ERR_clear_error();
    if (ERR_GET_LIB(code) == ERR_LIB_PEM && ERR_GET_REASON(code) == PEM_R_NO_START_LINE) break;
    return TlsProblem{false, std::string("certificate ") + std::to_string(index) +
                                 " of the chain does not parse"};
  }

  Bio keys = memory_bio(key_pem);
  // A null passphrase callback that fails: an encrypted key is an error, not a prompt.
  auto no_passphrase = [](char*, int, int, void*) { return 0; };
  Key key(PEM_read_bio_PrivateKey(keys.get(), nullptr, no_passphrase, nullptr));
  if (!key) {
    return TlsProblem{true, std::string("holds no unencrypted PEM private key (-----BEGIN PRIVATE "
                                        "KEY----- or -----BEGIN RSA/EC PRIVATE KEY-----)") +
                                openssl_reason()};
  }
  if (X509_check_private_key(leaf.get(), key.get()) != 1) {
    ERR_clear_error();
    return TlsProblem{true, "is not the key of the certificate (their public keys differ)"};
  }

  std::time_t at = now;
  if (X509_cmp_time(X509_get0_notAfter(leaf.get()), &at) < 0) {
    return TlsProblem{false, std::string("expired on ") + utc_text(X509_get0_notAfter(leaf.get()))};
  }
  if (X509_cmp_time(X509_get0_notBefore(leaf.get()), &at) > 0) {
    return TlsProblem{
        false, std::string("is not valid before ") + utc_text(X509_get0_notBefore(leaf.get()))};
  }
  return std::nullopt;
}

}  // namespace sluice::policy

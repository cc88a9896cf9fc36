#include "config/values/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

namespace sluice::config {
namespace {

using Key = TlsFilesError::Key;

// OpenSSL's reason for the last failure ("no certificate or crl found",
// "key values mismatch"), and an empty error queue for the next call.
std::string openssl_reason() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  const char* reason = code == 0 ? nullptr : ERR_reason_error_string(code);
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

// OpenSSL says "system lib" for a file it cannot open: check first, so the
// message names the file and the system's reason.
std::optional<std::string> unreadable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::string why = "cannot open ";
    why.append(path).append(": ").append(std::strerror(errno));
    return why;
  }
  std::fclose(f);
  return std::nullopt;
}

TlsFilesError failure(Key key, const std::string& path, const char* what) {
  std::string message = "cannot load ";
  message.append(what).append(" from ").append(path).append(": ").append(openssl_reason());
  return {key, std::move(message)};
}

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
using PrivateKey = std::unique_ptr<EVP_PKEY, KeyFree>;

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

}  // namespace

std::optional<TlsFilesError> load_tls_files(SSL_CTX* ctx, const TlsFiles& files) {
  ERR_clear_error();
  if (files.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1)
      return TlsFilesError{Key::kCaFile, "cannot load the system's CA paths: " + openssl_reason()};
  } else {
    if (auto why = unreadable(files.ca_file)) return TlsFilesError{Key::kCaFile, std::move(*why)};
    if (SSL_CTX_load_verify_locations(ctx, files.ca_file.c_str(), nullptr) != 1)
      return failure(Key::kCaFile, files.ca_file, "CA certificates");
  }
  if (files.cert_file.empty()) return std::nullopt;
  if (auto why = unreadable(files.cert_file)) return TlsFilesError{Key::kCertFile, std::move(*why)};
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1)
    return failure(Key::kCertFile, files.cert_file, "a certificate");
  if (auto why = unreadable(files.key_file)) return TlsFilesError{Key::kKeyFile, std::move(*why)};
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return failure(Key::kKeyFile, files.key_file, "a private key");
  if (SSL_CTX_check_private_key(ctx) != 1) {
    std::string message = "the key in ";
    message.append(files.key_file)
        .append(" does not match the certificate in ")
        .append(files.cert_file)
        .append(": ")
        .append(openssl_reason());
    return TlsFilesError{Key::kKeyFile, std::move(message)};
  }
  return std::nullopt;
}

std::optional<TlsFilesError> check_tls_files(const TlsFiles& files) {
  const std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                              &SSL_CTX_free);
  if (ctx == nullptr)
    return TlsFilesError{Key::kCaFile, "cannot create a TLS context: " + openssl_reason()};
  return load_tls_files(ctx.get(), files);
}

std::optional<TlsFilesError> check_server_pair(std::string_view cert_pem, std::string_view key_pem,
                                               std::time_t now) {
  ERR_clear_error();
  Bio certs = memory_bio(cert_pem);
  Certificate leaf(PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr));
  if (!leaf) {
    return TlsFilesError{Key::kCertFile,
                         std::string("holds no PEM certificate (-----BEGIN CERTIFICATE-----)") +
                             " (" + openssl_reason() + ")"};
  }
  // The rest of the chain, up to the end of the text: each must parse.
  for (int index = 2;; ++index) {
    Certificate next(PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr));
    if (next) continue;
    const unsigned long code = ERR_peek_last_error();
    ERR_clear_error();
    if (ERR_GET_LIB(code) == ERR_LIB_PEM && ERR_GET_REASON(code) == PEM_R_NO_START_LINE) break;
    return TlsFilesError{Key::kCertFile, std::string("certificate ") + std::to_string(index) +
                                             " of the chain does not parse"};
  }

  Bio keys = memory_bio(key_pem);
  // A null passphrase callback that fails: an encrypted key is an error, not a prompt.
  auto no_passphrase = [](char*, int, int, void*) { return 0; };
  PrivateKey key(PEM_read_bio_PrivateKey(keys.get(), nullptr, no_passphrase, nullptr));
  if (!key) {
    return TlsFilesError{Key::kKeyFile,
                         std::string("holds no unencrypted PEM private key (-----BEGIN PRIVATE "
                                     "KEY----- or -----BEGIN RSA/EC PRIVATE KEY-----)") +
                             " (" + openssl_reason() + ")"};
  }
  if (X509_check_private_key(leaf.get(), key.get()) != 1) {
    ERR_clear_error();
    return TlsFilesError{Key::kKeyFile,
                         "is not the key of the certificate (their public keys differ)"};
  }

  std::time_t at = now;
  if (X509_cmp_time(X509_get0_notAfter(leaf.get()), &at) < 0) {
    return TlsFilesError{Key::kCertFile,
                         std::string("expired on ") + utc_text(X509_get0_notAfter(leaf.get()))};
  }
  if (X509_cmp_time(X509_get0_notBefore(leaf.get()), &at) > 0) {
    return TlsFilesError{Key::kCertFile, std::string("is not valid before ") +
                                             utc_text(X509_get0_notBefore(leaf.get()))};
  }
  return std::nullopt;
}

}  // namespace sluice::config

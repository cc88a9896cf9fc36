#include "config/tls_files.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

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

}  // namespace sluice::config

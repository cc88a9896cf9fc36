// Loading a TLS client's files (CA bundle, certificate chain, private key)
// into an OpenSSL context. The Redis store builds its context with this, and
// the config loader runs it on a throwaway context, so a file the store would
// refuse is a config error at its key rather than a failure at start-up.
//
// Thread-safety: pure functions (they read the file system; OpenSSL's error
// queue is per thread).
#pragma once

#include <openssl/types.h>

#include <optional>
#include <string>

namespace sluice::config {

struct TlsFiles {
  std::string ca_file;    // PEM CA certificates; "" = OpenSSL's default paths
  std::string cert_file;  // PEM certificate chain, with key_file; "" = none
  std::string key_file;   // PEM private key of cert_file
};

struct TlsFilesError {
  enum class Key { kCaFile, kCertFile, kKeyFile };
  Key key;              // the setting at fault
  std::string message;  // e.g. "cannot open /x/ca.pem: No such file or directory"
};

// Loads `files` into `ctx`: the CAs to verify the server with, and the client
// certificate and key, checked to match. Both or neither of cert_file and
// key_file must be given (the caller checks that).
std::optional<TlsFilesError> load_tls_files(SSL_CTX* ctx, const TlsFiles& files);

// The same on a fresh client context that is then freed: a check of the files.
std::optional<TlsFilesError> check_tls_files(const TlsFiles& files);

}  // namespace sluice::config

// Checking TLS files before a config that names them is accepted, so that a
// bad file is a config error at its key rather than a failure at start-up
// (or, on reload, a config refused while the old one stays in force).
//
// A client's files (CA bundle, certificate chain, private key) are loaded
// into an OpenSSL context: the Redis store builds its context with this, and
// the config loader runs it on a throwaway context. A server's pair (`tls:`
// on `listen`) is checked as PEM text, the text the server then uses.
//
// Thread-safety: pure functions (they read the file system; OpenSSL's error
// queue is per thread).
#pragma once

#include <openssl/types.h>

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

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

// A server's certificate chain and key, as PEM text: the chain's certificates
// all parse; the key parses (unencrypted: a server restarted unattended cannot
// type a passphrase) and is the first certificate's; that certificate is
// within its validity period at `now`. The message starts after the file's
// name ("expired on 2026-11-30 23:29:11 UTC"); kCertFile or kKeyFile says
// which file it is about.
std::optional<TlsFilesError> check_server_pair(std::string_view cert_pem, std::string_view key_pem,
                                               std::time_t now);

}  // namespace sluice::config

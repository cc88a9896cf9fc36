// Checks a TLS certificate chain and private key (PEM text) before a config
// that names them is accepted, so that a bad pair is a load error at its line
// and a reload with one keeps the old config (and its certificate) in force.
//
// Checked: the chain's first certificate parses and so does every one after
// it; the key parses (unencrypted PEM: a server restarted unattended cannot
// type a passphrase); the key is the certificate's; the certificate is within
// its validity period at `now`.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::policy {

struct TlsProblem {
  bool in_key = false;  // the key (else the certificate) is at fault
  std::string message;
};

std::optional<TlsProblem> check_certificate_and_key(std::string_view cert_pem,
                                                    std::string_view key_pem, std::time_t now);

}  // namespace sluice::policy

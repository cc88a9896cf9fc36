// Test support: TLS certificates made with the openssl command in a fresh
// temporary folder (removed with the object): a CA; server certificates
// for 127.0.0.1 and localhost (subject CN "server", and "server-b" for a
// reload to another certificate), an expired one ("expired", valid until
// yesterday) and a client certificate, each with its own key and signed by
// that CA; and a second CA that signed none.
#pragma once

#include <string>

namespace sluice::testing {

class TestCerts {
 public:
  TestCerts();  // makes the files; ok() says whether it could
  ~TestCerts();
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  // False with a message in error() if openssl is missing or failed.
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  std::string ca() const { return dir_ + "/ca.pem"; }
  std::string server_cert() const { return dir_ + "/server.pem"; }
  std::string server_key() const { return dir_ + "/server.key"; }
  std::string server_b_cert() const { return dir_ + "/server-b.pem"; }
  std::string server_b_key() const { return dir_ + "/server-b.key"; }
  std::string expired_cert() const { return dir_ + "/expired.pem"; }
  std::string expired_key() const { return dir_ + "/expired.key"; }
  std::string client_cert() const { return dir_ + "/client.pem"; }
  std::string client_key() const { return dir_ + "/client.key"; }
  std::string other_ca() const { return dir_ + "/other-ca.pem"; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string error_;
};

}  // namespace sluice::testing

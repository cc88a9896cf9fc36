#include "tls/test_certs.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace sluice::testing {
namespace {

// P-256 keys: made in milliseconds, where RSA takes long under load.
constexpr const char* kNewKey = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

TestCerts::TestCerts() {
  char tmpl[] = "/tmp/sluice-certs-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  if (d == nullptr) {
    error_ = "cannot make a temporary folder";
    return;
  }
  dir_ = d;
  std::ofstream(dir_ + "/san.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  // A leaf: key and request, then signed by the CA `ca` (with the SAN), valid
  // for `days` from now (-1: it expired yesterday).
  const auto leaf = [&](const std::string& name, const std::string& ca, int days = 2) {
    std::string s = "openssl req";
    s.append(kNewKey)
        .append(" -keyout ")
        .append(name)
        .append(".key -out ")
        .append(name)
        .append(".csr -subj /CN=")
        .append(name)
        .append(" && openssl x509 -req -days ")
        .append(std::to_string(days))
        .append(" -in ")
        .append(name)
        .append(".csr -CA ")
        .append(ca)
        .append(".pem -CAkey ")
        .append(ca)
        .append(".key -CAcreateserial -extfile san.ext -out ")
        .append(name)
        .append(".pem");
    return s;
  };
  const auto ca = [&](const std::string& name) {
    std::string s = "openssl req -x509 -days 2";
    s.append(kNewKey)
        .append(" -keyout ")
        .append(name)
        .append(".key -out ")
        .append(name)
        .append(".pem -subj /CN=")
        .append(name);
    return s;
  };
  std::string script = "(cd ";
  script.append(dir_)
      .append(" && ")
      .append(ca("ca"))
      .append(" && ")
      .append(ca("other-ca"))
      .append(" && ")
      .append(leaf("server", "ca"))
      .append(" && ")
      .append(leaf("client", "ca"))
      .append(" && ")
      .append(leaf("server-b", "ca"))
      .append(" && ")
      .append(leaf("expired", "ca", -1))
      .append(") > openssl.log 2>&1");
  if (std::system(script.c_str()) != 0) {
    error_ = "openssl could not make the test certificates (is openssl on PATH?); see ";
    error_.append(dir_).append("/openssl.log");
  }
}

TestCerts::~TestCerts() {
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace sluice::testing

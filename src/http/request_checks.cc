#include "http/request_checks.h"

#include <vector>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/verb.hpp>

#include "policy/route_syntax.h"

namespace sluice::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

using Header = bhttp::request_header<>;

std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

RequestProblem bad(std::string message) {
  return RequestProblem{bhttp::status::bad_request, "BAD_REQUEST", std::move(message)};
}

// Every coding of every Transfer-Encoding field, in order. False when a
// field is not a valid list of tokens.
bool transfer_codings(const Header& req, std::vector<std::string_view>& out) {
  const auto [first, last] = req.equal_range(bhttp::field::transfer_encoding);
  for (auto it = first; it != last; ++it) {
    const bhttp::token_list list(it->value());
    size_t seen = 0;
    for (const beast::string_view coding : list) {
      out.push_back(sv(coding));
      ++seen;
    }
    if (seen == 0) return false;  // empty or malformed (token_list yields nothing)
  }
  return true;
}

std::optional<RequestProblem> check_transfer_encoding(const Header& req) {
  if (req.find(bhttp::field::transfer_encoding) == req.end()) return std::nullopt;
  std::vector<std::string_view> codings;
  if (!transfer_codings(req, codings)) return bad("malformed Transfer-Encoding");
  if (req.version() < 11) {
    return bad("Transfer-Encoding is not allowed in an HTTP/1.0 request");
  }
  if (codings.size() == 1 && beast::iequals(codings[0], "identity")) return std::nullopt;
  if (!beast::iequals(codings.back(), "chunked")) {
    return bad("the final Transfer-Encoding must be chunked");
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (beast::iequals(codings[i], "chunked")) return bad("chunked may be applied only once");
  }
  if (req.find(bhttp::field::content_length) != req.end()) {
    return bad("Transfer-Encoding and Content-Length together");
  }
  return std::nullopt;
}

}  // namespace

std::optional<RequestProblem> check_request_header(const Header& req) {
  // Beast parses any token as a method and names the ones it knows (all
  // upper-case): only an unknown one can hold a lower-case letter.
  if (req.method() == bhttp::verb::unknown && !policy::is_request_method(sv(req.method_string()))) {
    return bad("the method must be an upper-case token (methods are case-sensitive): got \"" +
               std::string(sv(req.method_string())) + "\"");
  }
  if (req.method() == bhttp::verb::connect) {
    return RequestProblem{bhttp::status::method_not_allowed, "METHOD_NOT_ALLOWED",
                          "CONNECT is not supported: Sluice is not a forward proxy"};
  }
  const size_t hosts = req.count(bhttp::field::host);
  if (hosts > 1) return bad("more than one Host header");
  if (hosts == 0 && req.version() >= 11) return bad("an HTTP/1.1 request needs a Host header");
  return check_transfer_encoding(req);
}

std::string codings_before_chunked(const Header& req) {
  std::vector<std::string_view> codings;
  transfer_codings(req, codings);
  std::string out;
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    out.append(codings[i]);
    out.append(", ");
  }
  return out;
}

}  // namespace sluice::http

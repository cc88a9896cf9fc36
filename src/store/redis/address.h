// Redis addresses: "host:port", "[v6]:port" or
// "redis[s]://[[user]:password@]host[:port][/database]", in the one grammar of
// config/values.h (parse_redis_url), as the server config reads them.
#pragma once

#include <string>
#include <string_view>

#include "sluice/result.h"

namespace sluice::redis {

struct Endpoint {
  std::string host;
  int port = 6379;
  bool tls = false;  // a rediss:// URL
  // Set only when the address carries them (a redis:// URL); the store's
  // options fill in the rest.
  bool has_credentials = false;
  std::string username;
  std::string password;
  int database = -1;  // -1: not given
  // A Redis Sentinel: the handshake is PING (a sentinel has no TIME), never SELECT.
  bool sentinel = false;

  // "host:port" (IPv6 hosts in brackets): the name of a node in the cluster map.
  std::string name() const;
};

Result<Endpoint> parse_address(std::string_view text);

// Splits "host:port" as CLUSTER SLOTS and MOVED give it (host may be empty).
bool split_host_port(std::string_view text, std::string* host, int* port);

}  // namespace sluice::redis

// gRPC's own log lines (gpr_log), written through Sluice's log.
//
// gRPC writes to stderr in its own format, and writes one line per failed
// TLS handshake on the gRPC port ("Handshake failed with fatal error ..."):
// a client that fails handshakes in a loop made 3,000 lines in 0.1 s. Once
// install()ed, every gRPC line goes to spdlog ("grpc: <message>"; gRPC's
// errors as errors, its info and debug lines at debug and trace, so
// logging.level decides as for any line), except failed TLS handshakes:
// each is counted (handshake_failures()) and logged through a DenialLogGate
// at logging.denial_log_per_second, with the count of those not logged.
//
// To see every failed handshake (one that ends in EOF or a timeout logs no
// error), gRPC is asked for its debug lines too: its one line per failed
// handshake at debug level ("Security handshake failed: ...") is what is
// counted. A debug line is formatted by gRPC before it is dropped here;
// gRPC writes none per call unless its tracers are on (GRPC_TRACE).
//
// Thread-safety: process-wide; install() and set_handshake_log_rate() from
// any thread, gRPC calls the router from its own.
#pragma once

#include <cstdint>

namespace sluice::rls {

class GrpcLog {
 public:
  // Routes gRPC's lines as above; later calls do nothing.
  static void install();
  // Failed handshakes are logged at most this often per second (0: never).
  static void set_handshake_log_rate(double per_second);
  // TLS handshakes that failed on a gRPC server of this process (bad bytes,
  // a client that closed or stalled until the handshake timeout).
  static uint64_t handshake_failures();
};

}  // namespace sluice::rls

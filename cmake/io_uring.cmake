# SLUICE_IO_URING: build every target with Asio's io_uring backend instead of
# its epoll reactor, for measurement. docs/BENCHMARKS.md ("Gateway (wrk)",
# "io_uring: ...") has it: a tenth of the system calls per request, and no
# less CPU per request than epoll (more, as Asio 1.81 sets up its ring), so
# OFF. Asio then submits socket reads, writes, accepts and
# its timer wake-ups to an io_uring ring (liburing-dev) and reaps their
# completions, where epoll waits for readiness and calls recv/send itself.
# The definitions must hold for every translation unit that includes Asio
# (its types differ between the backends), hence global; liburing is linked
# into every target for the same reason.
option(SLUICE_IO_URING "Build with Asio's io_uring backend instead of epoll (needs liburing)" OFF)

if(SLUICE_IO_URING)
  find_path(SLUICE_LIBURING_INCLUDE_DIR liburing.h)
  find_library(SLUICE_LIBURING_LIBRARY NAMES uring)
  if(NOT SLUICE_LIBURING_INCLUDE_DIR OR NOT SLUICE_LIBURING_LIBRARY)
    message(FATAL_ERROR "SLUICE_IO_URING needs liburing (Debian: apt-get install liburing-dev), "
      "or -DSLUICE_IO_URING=OFF")
  endif()
  # BOOST_ASIO_DISABLE_EPOLL makes io_uring Asio's default backend
  # (BOOST_ASIO_HAS_IO_URING_AS_DEFAULT), not only the file I/O one.
  add_compile_definitions(BOOST_ASIO_HAS_IO_URING BOOST_ASIO_DISABLE_EPOLL)
  include_directories(SYSTEM ${SLUICE_LIBURING_INCLUDE_DIR})
  link_libraries(${SLUICE_LIBURING_LIBRARY})
  message(STATUS "Asio backend: io_uring (${SLUICE_LIBURING_LIBRARY})")
  # Not for serving: Boost 1.81's backend frees an io_context's socket
  # service before the accept op a closed acceptor left behind, and the
  # op's destruction then uses it (https://github.com/chriskohlhoff/asio/issues/1235):
  # ASan reports it at every `sluice serve` exit. Installed Sluice::redis
  # does not name liburing either.
  message(WARNING "SLUICE_IO_URING is for measurement only (docs/BENCHMARKS.md, "
    "\"io_uring: ...\"): Boost 1.81's io_uring backend has a use-after-free when an "
    "io_context with a closed acceptor is destroyed, and the test suite fails with it")
endif()

# SLUICE_ALLOCATOR: the malloc the `sluice` binary runs with, one of Debian's
# (docs/BENCHMARKS.md, "Gateway against nginx", has the measurement that chose the
# default):
#   glibc     the C library's own
#   mimalloc  libmimalloc-dev
#   jemalloc  libjemalloc-dev
#   tcmalloc  libgoogle-perftools-dev (tcmalloc_minimal: no heap profiler)
# The library is linked as a shared library ahead of libc, so it replaces
# malloc and operator new for the whole process (Boost, gRPC, OpenSSL too),
# and the .deb depends on its runtime package (dpkg-shlibdeps finds it).
# Sanitizer and fuzz builds keep glibc: ASan brings its own allocator.
# glibc by default: none of the three was ahead of it beyond the spread of
# repeated runs on any path (2026-12-02), and it needs no package.
set(SLUICE_ALLOCATOR_DEFAULT glibc)
set(SLUICE_ALLOCATOR ${SLUICE_ALLOCATOR_DEFAULT}
  CACHE STRING "malloc of the sluice binary: glibc, mimalloc, jemalloc or tcmalloc")
set_property(CACHE SLUICE_ALLOCATOR PROPERTY STRINGS glibc mimalloc jemalloc tcmalloc)

# sluice_use_allocator(TARGET): links TARGET (an executable) with the allocator.
function(sluice_use_allocator target)
  set(allocator ${SLUICE_ALLOCATOR})
  if(SLUICE_SANITIZE OR SLUICE_FUZZ)
    set(allocator glibc)
  endif()
  if(allocator STREQUAL "glibc")
    return()
  elseif(allocator STREQUAL "mimalloc")
    set(library mimalloc)
    set(package libmimalloc-dev)
  elseif(allocator STREQUAL "jemalloc")
    set(library jemalloc)
    set(package libjemalloc-dev)
  elseif(allocator STREQUAL "tcmalloc")
    set(library tcmalloc_minimal)
    set(package libgoogle-perftools-dev)
  else()
    message(FATAL_ERROR "SLUICE_ALLOCATOR=${allocator}: use glibc, mimalloc, jemalloc or tcmalloc")
  endif()
  find_library(SLUICE_ALLOCATOR_LIBRARY_${allocator} NAMES ${library})
  if(NOT SLUICE_ALLOCATOR_LIBRARY_${allocator})
    message(FATAL_ERROR "SLUICE_ALLOCATOR=${allocator} needs lib${library} "
      "(Debian: apt-get install ${package}), or -DSLUICE_ALLOCATOR=glibc")
  endif()
  # --no-as-needed: nothing calls the library by name, malloc is found in it
  # because it comes first; the linker must not drop it as unused.
  target_link_libraries(${target} PRIVATE -Wl,--push-state,--no-as-needed
    ${SLUICE_ALLOCATOR_LIBRARY_${allocator}} -Wl,--pop-state)
  message(STATUS "sluice allocator: ${allocator} (${SLUICE_ALLOCATOR_LIBRARY_${allocator}})")
endfunction()

# ctest install_consumers (label install): installs the build tree under test
# into a fresh prefix, checks the exact list of installed files, then builds
# programs against that prefix the two ways a user would and runs them:
#
#   examples/embed with find_package(Sluice) + Sluice::core, and with
#   `pkg-config --cflags --libs sluice-core`: both print exactly what the
#   in-tree embed_example prints;
#   tests/install/redis_consumer with find_package(Sluice COMPONENTS redis),
#   and with `pkg-config sluice-redis` (when the Redis store is built): both
#   print redis_consumer/expected.txt.
#
# -D arguments: SOURCE_DIR BUILD_DIR WORK_DIR BUILD_TYPE CXX_COMPILER
# PKG_CONFIG LIBDIR INCLUDEDIR BINDIR DOCDIR DATADIR EMBED_EXAMPLE VERSION
# WITH_REDIS WITH_SERVER SANITIZE_FLAGS (space-separated; given to every
# compile and link, since an instrumented library links only into an
# instrumented program).
cmake_minimum_required(VERSION 3.25)

foreach(var SOURCE_DIR BUILD_DIR WORK_DIR BUILD_TYPE CXX_COMPILER PKG_CONFIG LIBDIR INCLUDEDIR
            BINDIR DOCDIR DATADIR EMBED_EXAMPLE VERSION WITH_REDIS WITH_SERVER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake: -D${var}= is missing")
  endif()
endforeach()
separate_arguments(sanitize UNIX_COMMAND "${SANITIZE_FLAGS}")
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config was not found when this tree was configured: install it "
    "(Debian: pkg-config) and configure again")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

function(expect_equal what actual expected)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "${what}:\n--- expected\n${expected}\n--- actual\n${actual}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

# ---------------------------------------------------------------- install
sluice_run(WHAT "cmake --install" COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

string(TOLOWER "${BUILD_TYPE}" config)
if(config STREQUAL "")
  set(config noconfig)
endif()
file(GLOB headers RELATIVE ${SOURCE_DIR}/include ${SOURCE_DIR}/include/sluice/*.h)
if(NOT WITH_REDIS)
  list(REMOVE_ITEM headers sluice/redis_store.h)
endif()
set(expected)
foreach(h ${headers})
  list(APPEND expected ${INCLUDEDIR}/${h})
endforeach()
list(APPEND expected
  ${LIBDIR}/libsluice_core.a
  ${LIBDIR}/libsluice_store.a
  ${LIBDIR}/cmake/Sluice/SluiceConfig.cmake
  ${LIBDIR}/cmake/Sluice/SluiceConfigVersion.cmake
  ${LIBDIR}/cmake/Sluice/SluiceCoreTargets.cmake
  ${LIBDIR}/cmake/Sluice/SluiceCoreTargets-${config}.cmake
  ${LIBDIR}/pkgconfig/sluice-core.pc)
if(WITH_REDIS)
  list(APPEND expected
    ${LIBDIR}/libsluice_redis.a
    ${LIBDIR}/libsluice_config_values.a
    ${LIBDIR}/cmake/Sluice/SluiceRedisTargets.cmake
    ${LIBDIR}/cmake/Sluice/SluiceRedisTargets-${config}.cmake
    ${LIBDIR}/pkgconfig/sluice-redis.pc)
endif()
if(WITH_SERVER)
  # The binary, its docs, the Grafana dashboard and the alert rules; the
  # server's own libraries, the unit and /etc are not installed (the unit
  # and config are the .deb's).
  list(APPEND expected ${BINDIR}/sluice ${DOCDIR}/README.md
    ${DATADIR}/sluice/grafana/sluice.json ${DATADIR}/sluice/prometheus/alerts.yaml)
  file(GLOB docs RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/docs/*.md)
  foreach(d ${docs})
    string(REPLACE "docs/" "${DOCDIR}/" d ${d})
    list(APPEND expected ${d})
  endforeach()
endif()
list(SORT expected)
file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
list(SORT installed)
string(REPLACE ";" "\n" expected_text "${expected}")
string(REPLACE ";" "\n" installed_text "${installed}")
expect_equal("files installed under the prefix" "${installed_text}" "${expected_text}")

# What every consumer must print: the in-tree embed_example's output.
sluice_run(WHAT "in-tree embed_example" COMMAND ${EMBED_EXAMPLE} OUT_VAR embed_expected)
if(NOT embed_expected MATCHES "request 1: allowed")
  message(FATAL_ERROR "in-tree embed_example printed:\n${embed_expected}")
endif()
file(READ ${SOURCE_DIR}/tests/install/redis_consumer/expected.txt redis_expected)

# ---------------------------------------------------------------- CMake package
# Builds the project in SRC with find_package() looking in the prefix only
# through CMAKE_PREFIX_PATH, as a user's build would; checks that it found
# this prefix's Sluice (not one installed on the machine), runs PROGRAM.
function(cmake_consumer name src program expected)
  set(bin ${WORK_DIR}/${name})
  string(JOIN " " flags ${sanitize})
  sluice_run(WHAT "configuring ${name}" COMMAND ${CMAKE_COMMAND} -S ${src} -B ${bin}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} "-DCMAKE_CXX_FLAGS=${flags}"
    "-DCMAKE_EXE_LINKER_FLAGS=${flags}")
  file(STRINGS ${bin}/CMakeCache.txt sluice_dir REGEX "^Sluice_DIR:")
  expect_equal("${name}: the Sluice package used" "${sluice_dir}"
    "Sluice_DIR:PATH=${prefix}/${LIBDIR}/cmake/Sluice")
  sluice_run(WHAT "building ${name}" COMMAND ${CMAKE_COMMAND} --build ${bin})
  sluice_run(WHAT "running ${name}" COMMAND ${bin}/${program} OUT_VAR out)
  expect_equal("${name} output" "${out}" "${expected}")
endfunction()

cmake_consumer(cmake-embed ${SOURCE_DIR}/examples/embed embed_example "${embed_expected}")
if(WITH_REDIS)
  cmake_consumer(cmake-redis ${SOURCE_DIR}/tests/install/redis_consumer redis_consumer
    "${redis_expected}")
endif()

# ---------------------------------------------------------------- pkg-config
# Compiles SOURCE in one command with `pkg-config --cflags --libs MODULE`, the
# prefix's pkgconfig folder searched first (the system's holds hiredis, spdlog),
# and runs it.
set(pc_env PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig)
function(pkgconfig_consumer name module source expected)
  sluice_run(WHAT "pkg-config --modversion ${module}" ENV ${pc_env}
    COMMAND ${PKG_CONFIG} --modversion ${module} OUT_VAR version)
  expect_equal("pkg-config --modversion ${module}" "${version}" "${VERSION}\n")
  sluice_run(WHAT "pkg-config ${module}" ENV ${pc_env}
    COMMAND ${PKG_CONFIG} --cflags --libs ${module} OUT_VAR flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  sluice_run(WHAT "compiling ${name}" COMMAND ${CXX_COMPILER} -std=c++20 ${sanitize} ${source}
    -o ${WORK_DIR}/${name} ${flags})
  sluice_run(WHAT "running ${name}" COMMAND ${WORK_DIR}/${name} OUT_VAR out)
  expect_equal("${name} output" "${out}" "${expected}")
endfunction()

pkgconfig_consumer(pkgconfig-embed sluice-core ${SOURCE_DIR}/examples/embed/main.cc
  "${embed_expected}")
if(WITH_REDIS)
  pkgconfig_consumer(pkgconfig-redis sluice-redis ${SOURCE_DIR}/tests/install/redis_consumer/main.cc
    "${redis_expected}")
endif()

file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "installed files, CMake package and pkg-config files: OK")

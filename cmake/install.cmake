# What `cmake --install` puts under the prefix (GNUInstallDirs paths):
#
#   include/sluice/*.h                      the public API (redis_store.h with the Redis store)
#   lib/<multiarch>/libsluice_core.a        Sluice::core, sluice-core.pc
#   lib/<multiarch>/libsluice_redis.a       Sluice::redis, sluice-redis.pc (SLUICE_BUILD_REDIS)
#   lib/<multiarch>/libsluice_config_values.a   what libsluice_redis links privately
#   lib/<multiarch>/cmake/Sluice/           find_package(Sluice [COMPONENTS redis])
#   lib/<multiarch>/pkgconfig/              sluice-core.pc, sluice-redis.pc
#   bin/sluice, share/doc/sluice/           the server and its docs (SLUICE_BUILD_SERVER)
#
# The server's own layers (config, policy, http, rls, ...) are not installed:
# no program links them but `sluice`. The systemd unit and /etc/sluice are the
# .deb's (cmake/package.cmake), since --prefix must not send files to /etc.
#
# Components: `dev` (library), `server` (binary, docs), `deb` (package only).

include(CMakePackageConfigHelpers)

set(SLUICE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Sluice)
set(SLUICE_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---------------------------------------------------------------- headers
file(GLOB SLUICE_PUBLIC_HEADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/sluice/*.h)
if(NOT SLUICE_BUILD_REDIS)
  # A header for a library that is not installed would only mislead.
  list(REMOVE_ITEM SLUICE_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/include/sluice/redis_store.h)
endif()
install(FILES ${SLUICE_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice COMPONENT dev)

# ---------------------------------------------------------------- Sluice::core
# Two export sets, so that a program using only the memory store never needs
# the Redis store's dependencies (SluiceConfig.cmake loads the second on request).
set_target_properties(sluice_core PROPERTIES EXPORT_NAME core)
install(TARGETS sluice_core EXPORT SluiceCoreTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(EXPORT SluiceCoreTargets NAMESPACE Sluice:: DESTINATION ${SLUICE_CMAKE_DIR} COMPONENT dev)

# ---------------------------------------------------------------- Sluice::redis
if(SLUICE_BUILD_REDIS)
  set_target_properties(sluice_redis PROPERTIES EXPORT_NAME redis)
  # A static library's private dependencies are still linked by its users:
  # libsluice_config_values.a (address parsing) is installed with it, as
  # Sluice::config_values, an implementation detail nobody links by hand.
  set_target_properties(sluice_config_values PROPERTIES EXPORT_NAME config_values)
  install(TARGETS sluice_redis sluice_config_values EXPORT SluiceRedisTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
  install(EXPORT SluiceRedisTargets NAMESPACE Sluice:: DESTINATION ${SLUICE_CMAKE_DIR}
    COMPONENT dev)
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SluiceConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/SluiceConfig.cmake INSTALL_DESTINATION ${SLUICE_CMAKE_DIR})
# 0.x: a new minor version may change the API, so only the same major.minor
# satisfies a request (find_package(Sluice 0.1) accepts 0.1.x, not 0.2).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/SluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/SluiceConfig.cmake
  ${PROJECT_BINARY_DIR}/install/SluiceConfigVersion.cmake
  DESTINATION ${SLUICE_CMAKE_DIR} COMPONENT dev)

# ---------------------------------------------------------------- pkg-config
# The .pc files find the prefix from their own place (${pcfiledir}), as the
# CMake package does, so `cmake --install --prefix DIR` and a moved tree work.
file(RELATIVE_PATH SLUICE_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${SLUICE_PKGCONFIG_DIR}
  ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" SLUICE_PC_TO_PREFIX "${SLUICE_PC_TO_PREFIX}")
set(SLUICE_PC_FILES sluice-core.pc)
if(SLUICE_BUILD_REDIS)
  list(APPEND SLUICE_PC_FILES sluice-redis.pc)
endif()
foreach(pc ${SLUICE_PC_FILES})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.in ${PROJECT_BINARY_DIR}/install/${pc} @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/install/${pc} DESTINATION ${SLUICE_PKGCONFIG_DIR}
    COMPONENT dev)
endforeach()

# ---------------------------------------------------------------- the server
if(SLUICE_BUILD_SERVER)
  install(TARGETS sluice RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
  file(GLOB SLUICE_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
  install(FILES ${PROJECT_SOURCE_DIR}/README.md ${SLUICE_DOCS}
    DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT server)
  # The Grafana dashboard and Prometheus alert rules (docs/DEPLOY.md, "Monitoring").
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/grafana/sluice.json
    DESTINATION ${CMAKE_INSTALL_DATADIR}/sluice/grafana COMPONENT server)
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/prometheus/alerts.yaml
    DESTINATION ${CMAKE_INSTALL_DATADIR}/sluice/prometheus COMPONENT server)
endif()

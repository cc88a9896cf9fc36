# The .deb for operators (`make package`, or `cpack` in a build tree):
#
#   /usr/bin/sluice                         the server (component server)
#   /usr/share/doc/sluice/                  README.md, docs/*.md (component server)
#   /lib/systemd/system/sluice.service      the unit (component deb)
#   /etc/sluice/sluice.yaml                 the config, a conffile (component deb)
#
# postinst creates the system user `sluice` the unit runs as. The library
# (component dev) is not in this package: programs embedding Sluice build
# against an install of the library (cmake/install.cmake).

# The unit and the config have absolute destinations. Component `deb` is
# EXCLUDE_FROM_ALL so that a plain `cmake --install --prefix DIR` never writes
# to /etc or /lib; CPack installs it by name into its staging tree.
# /lib/systemd/system is where Debian 12 packages ship units (dpkg's view of
# the merged /usr).
install(FILES ${PROJECT_SOURCE_DIR}/packaging/sluice.service
  DESTINATION /lib/systemd/system COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/sluice.yaml
  DESTINATION /etc/sluice COMPONENT deb EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_VENDOR "Sluice")
# The Maintainer field dpkg requires: whoever builds the package for their site.
set(SLUICE_PACKAGE_MAINTAINER "Sluice maintainers <maintainers@sluice.invalid>" CACHE STRING
  "The .deb's Maintainer field")
set(CPACK_PACKAGE_CONTACT ${SLUICE_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "rate limiting gateway and decision service for APIs")
set(CPACK_PACKAGE_DESCRIPTION
  "Sluice runs as a gateway proxy in front of an API or as a decision service \
(POST /v1/check, nginx auth_request, Envoy RLS v3), with token bucket, GCRA, \
fixed window, sliding log and sliding window limits held in memory or in Redis.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Only the server and its system files; one package, not one per component.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server deb)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # sluice_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# The shared libraries the binary links (libc, libstdc++, yaml-cpp, spdlog,
# gRPC, ...), computed by dpkg-shlibdeps; adduser for postinst.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/deb/conffiles
  ${PROJECT_SOURCE_DIR}/packaging/deb/postinst
  ${PROJECT_SOURCE_DIR}/packaging/deb/prerm
  ${PROJECT_SOURCE_DIR}/packaging/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

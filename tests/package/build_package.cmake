# ctest package_build (label package, the fixture of the package tests):
# builds the .deb from the build tree under test with its CPackConfig.cmake,
# then unpacks it with dpkg-deb for package_tests:
#   OUT/sluice.deb   the package
#   OUT/root/        its files (dpkg-deb -x)
#   OUT/control/     its control files (dpkg-deb -e): control, conffiles, scripts
#
# -D arguments: BUILD_DIR OUT CPACK DPKG_DEB
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../install/run.cmake)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
sluice_run(WHAT cpack COMMAND ${CPACK} -G DEB --config ${BUILD_DIR}/CPackConfig.cmake -B ${OUT}/cpack)
file(GLOB debs ${OUT}/cpack/*.deb)
list(LENGTH debs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "cpack should make one .deb, made: ${debs}")
endif()
file(RENAME ${debs} ${OUT}/sluice.deb)
file(REMOVE_RECURSE ${OUT}/cpack)  # CPack's staging copies
sluice_run(WHAT "dpkg-deb -x" COMMAND ${DPKG_DEB} -x ${OUT}/sluice.deb ${OUT}/root)
sluice_run(WHAT "dpkg-deb -e" COMMAND ${DPKG_DEB} -e ${OUT}/sluice.deb ${OUT}/control)
message(STATUS "built and unpacked ${OUT}/sluice.deb")

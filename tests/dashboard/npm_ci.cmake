# The fixture of the dashboard test: installs playwright-core into the build
# directory (never into the source tree) from the committed lock file.
#
# Run as: cmake -DSOURCE_DIR=<tests/dashboard> -DNODE_DIR=<dir> -DNPM=<npm> -P npm_ci.cmake
# `npm ci` runs only when the lock file changed since the last install, so a
# second `make test` does not download anything.
file(MAKE_DIRECTORY "${NODE_DIR}")
file(READ "${SOURCE_DIR}/package-lock.json" lock)
set(stamp "${NODE_DIR}/node_modules/.sluice-installed-lock.json")
if(EXISTS "${stamp}" AND EXISTS "${NODE_DIR}/node_modules/playwright-core/package.json")
  file(READ "${stamp}" installed)
  if(installed STREQUAL lock)
    message(STATUS "playwright-core already installed in ${NODE_DIR}")
    return()
  endif()
endif()
configure_file("${SOURCE_DIR}/package.json" "${NODE_DIR}/package.json" COPYONLY)
configure_file("${SOURCE_DIR}/package-lock.json" "${NODE_DIR}/package-lock.json" COPYONLY)
execute_process(COMMAND "${NPM}" ci --no-audit --no-fund
  WORKING_DIRECTORY "${NODE_DIR}" RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "npm ci failed in ${NODE_DIR} (${result})")
endif()
file(WRITE "${stamp}" "${lock}")

# ctest install_core_only_configure (label install): configures this source
# tree as a library-only build (SLUICE_BUILD_SERVER=OFF SLUICE_BUILD_REDIS=OFF,
# tests and benchmarks left ON, so their guards are exercised too) and checks,
# in CMake's trace, that the only package it looks for is Threads: no
# Boost, gRPC, Protobuf, yaml-cpp, spdlog, hiredis, GTest or benchmark.
#
# -D arguments: SOURCE_DIR WORK_DIR CXX_COMPILER
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DSLUICE_BUILD_SERVER=OFF -DSLUICE_BUILD_REDIS=OFF
    -DSLUICE_BUILD_TESTS=ON -DSLUICE_BUILD_BENCH=ON
    --trace-expand --trace-redirect=${WORK_DIR}/trace.txt
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the library-only configure failed (${rc}):\n${out}\n${err}")
endif()

# Trace lines read "<file>(<line>):  <command>(<arguments> )".
file(STRINGS ${WORK_DIR}/trace.txt lookups
  REGEX "^[^ ]+\\([0-9]+\\): +(find_package|find_dependency|pkg_check_modules|pkg_search_module)\\(")
set(found)
foreach(line ${lookups})
  string(REGEX REPLACE "^[^ ]+\\([0-9]+\\): +" "" call "${line}")
  list(APPEND found "${call}")
endforeach()
string(REPLACE ";" "\n" found_text "${found}")
if(NOT found_text STREQUAL "find_package(Threads REQUIRED )")
  message(FATAL_ERROR "a library-only configure should look for Threads alone; it called:\n${found_text}")
endif()

file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "library-only configure: Threads is the only package looked for")

# ctest `layers`: every #include "<folder>/..." in src/ must name a folder
# the file's layer may include (cmake/layers.cmake). The build already fails
# on an upward include (each layer compiles against an include root of only
# its allowed folders); this names every offending line at once.
#
#   cmake -DSOURCE_DIR=<repo> -P tests/layers.cmake
include(${SOURCE_DIR}/cmake/layers.cmake)

# The layer of a source file, by folder (src/store/redis before src/store,
# the simulator's files of src/cli before the rest).
function(layer_of file out)
  file(RELATIVE_PATH rel ${SOURCE_DIR}/src ${file})
  if(rel MATCHES "^store/redis/")
    set(layer redis)
  elseif(rel MATCHES "^(core|store)/")
    set(layer core)
  elseif(rel STREQUAL "config/values.cc" OR rel STREQUAL "config/values.h")
    set(layer config_values)
  elseif(rel MATCHES "^cli/(simulat|time_text|trace)")
    set(layer simulate)
  elseif(rel MATCHES "^util/")
    set(layer core)
  else()
    string(REGEX MATCH "^[a-z]+" layer ${rel})
  endif()
  set(${out} ${layer} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources ${SOURCE_DIR}/src/*.cc ${SOURCE_DIR}/src/*.h)
set(violations 0)
foreach(source ${sources})
  layer_of(${source} layer)
  if(NOT DEFINED SLUICE_LAYER_${layer})
    message(SEND_ERROR "${source}: src/ folder of no layer (add it to cmake/layers.cmake)")
    math(EXPR violations "${violations} + 1")
    continue()
  endif()
  file(STRINGS ${source} includes REGEX "^#include \"[a-z_]+/")
  foreach(line ${includes})
    string(REGEX MATCH "\"([a-z_]+)/" _ ${line})
    set(folder ${CMAKE_MATCH_1})
    if(folder STREQUAL "sluice" OR folder STREQUAL "envoy")
      continue()  # include/sluice (the public API) and the generated protos
    endif()
    list(FIND SLUICE_LAYER_${layer} ${folder} found)
    if(found EQUAL -1)
      file(RELATIVE_PATH rel ${SOURCE_DIR} ${source})
      message(SEND_ERROR "${rel}: ${line}: the ${layer} layer may include only "
        "${SLUICE_LAYER_${layer}} (cmake/layers.cmake)")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} include(s) from a layer above")
endif()
list(LENGTH sources n)
message(STATUS "layers: ${n} files, every include points down")

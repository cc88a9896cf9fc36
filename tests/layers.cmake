# ctest `layers`: every #include "<folder>/..." in src/ must name a folder
# the file's layer may include (cmake/layers.cmake), a public header
# (include/sluice/) counting as its layer's folder. The build already fails
# on an upward include of src/ (each layer compiles against an include root
# of only its allowed folders); this names every offending line at once,
# public headers included, and every file of src/ outside the map.
#
#   cmake -DSOURCE_DIR=<repo> -P tests/layers.cmake
cmake_minimum_required(VERSION 3.25)
include(${SOURCE_DIR}/cmake/layers.cmake)

# The layer whose folder holds `path` (a path under src/, or an include's
# path): the innermost one (store/redis before store). "" when none does.
function(layer_holding path out)
  set(found "")
  set(found_folder "")
  foreach(layer ${SLUICE_LAYERS})
    set(folder ${SLUICE_LAYER_FOLDER_${layer}})
    string(LENGTH "${folder}" length)
    string(LENGTH "${found_folder}" found_length)
    if(path MATCHES "^${folder}/" AND length GREATER found_length)
      set(found ${layer})
      set(found_folder ${folder})
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# The folder an include names: its layer's folder, or for a public header
# (sluice/NAME.h) the folder of the layer that implements it.
function(included_folder path out)
  set(folder "")
  if(path MATCHES "^sluice/([^/]+)$")
    set(header ${CMAKE_MATCH_1})
    set(folder ${SLUICE_LAYER_FOLDER_core})
    foreach(layer ${SLUICE_LAYERS})
      if(header IN_LIST SLUICE_PUBLIC_HEADERS_${layer})
        set(folder ${SLUICE_LAYER_FOLDER_${layer}})
      endif()
    endforeach()
  else()
    layer_holding(${path} layer)
    if(layer)
      set(folder ${SLUICE_LAYER_FOLDER_${layer}})
    endif()
  endif()
  set(${out} "${folder}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}/src ${SOURCE_DIR}/src/*.cc ${SOURCE_DIR}/src/*.h)
set(violations 0)
foreach(source ${sources})
  layer_holding(${source} layer)
  if(NOT layer)
    message(SEND_ERROR "src/${source}: in no layer's folder (add it to cmake/layers.cmake)")
    math(EXPR violations "${violations} + 1")
    continue()
  endif()
  file(STRINGS ${SOURCE_DIR}/src/${source} includes REGEX "^#include \"[a-z_]+/")
  foreach(line ${includes})
    string(REGEX MATCH "\"([^\"]+)\"" _ ${line})
    set(path ${CMAKE_MATCH_1})
    if(path MATCHES "^envoy/")
      continue()  # the generated protos (proto/)
    endif()
    included_folder(${path} folder)
    if(NOT folder OR NOT folder IN_LIST SLUICE_LAYER_${layer})
      list(JOIN SLUICE_LAYER_${layer} ", " allowed)
      message(SEND_ERROR "src/${source}: ${line}: the ${layer} layer (src/"
        "${SLUICE_LAYER_FOLDER_${layer}}) may include only ${allowed} (cmake/layers.cmake)")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} include(s) from a layer above, or file(s) outside the map")
endif()
list(LENGTH sources n)
message(STATUS "layers: ${n} files, every include points down")

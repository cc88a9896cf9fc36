# The layers of src/ and what each may include: the one place the
# architecture's dependency rule is written down (docs/ARCHITECTURE.md shows
# the same map). Each layer is one folder of src/ and one library; a folder
# inside another (store/redis, config/values) is a layer of its own, which
# the outer folder's layer does not see. Dependencies point downwards only:
#
#   cli -> http, rls -> render -> policy -> config -> config/values -> core
#   cli -> simulate -> store -> core;  policy -> store
#   store/redis -> store, config/values;  http, rls -> observe -> policy
#   (observe: metrics, logs and the decision observer, which sees policy's
#   plans and verdicts, never the doors);  util: header-only helpers
#
# sluice_layers(TARGET) gives TARGET an include root that holds links to
# exactly the folders its layer may include, so an upward include does not
# compile; tests/layers.cmake (ctest `layers`) checks every #include against
# the same map and names the offending line.

# The folder of each layer of src/, bottom up (util is header-only: no library).
set(SLUICE_LAYERS util core store config_values redis config observe policy render http rls
  simulate cli)
set(SLUICE_LAYER_FOLDER_util util)
set(SLUICE_LAYER_FOLDER_core core)
set(SLUICE_LAYER_FOLDER_store store)
set(SLUICE_LAYER_FOLDER_config_values config/values)
set(SLUICE_LAYER_FOLDER_redis store/redis)
set(SLUICE_LAYER_FOLDER_config config)
set(SLUICE_LAYER_FOLDER_observe observe)
set(SLUICE_LAYER_FOLDER_policy policy)
set(SLUICE_LAYER_FOLDER_render render)
set(SLUICE_LAYER_FOLDER_http http)
set(SLUICE_LAYER_FOLDER_rls rls)
set(SLUICE_LAYER_FOLDER_simulate simulate)
set(SLUICE_LAYER_FOLDER_cli cli)

# Folders of src/ each layer's files may include (their own included).
set(SLUICE_LAYER_util util)
set(SLUICE_LAYER_core core util)
set(SLUICE_LAYER_store store core util)
set(SLUICE_LAYER_config_values config/values core util)
set(SLUICE_LAYER_redis store/redis config/values store core util)
set(SLUICE_LAYER_config config config/values core util)
set(SLUICE_LAYER_observe observe policy config config/values store core util)
set(SLUICE_LAYER_policy policy config config/values store core util)
set(SLUICE_LAYER_render render policy config config/values store core util)
set(SLUICE_LAYER_http http render policy config config/values observe store core util)
set(SLUICE_LAYER_rls rls render policy config config/values observe store core util)
set(SLUICE_LAYER_simulate simulate store core util)
set(SLUICE_LAYER_cli cli simulate http rls render policy config config/values observe
  store/redis store core util)
# Tests: the fast unit tests see no server layer; the HTTP unit tests the
# http layer; the Redis tests the Redis store; the rest whatever they test.
set(SLUICE_LAYER_unit_tests simulate render policy config config/values observe store core util)
set(SLUICE_LAYER_http_tests ${SLUICE_LAYER_http})
set(SLUICE_LAYER_redis_tests ${SLUICE_LAYER_redis})
set(SLUICE_LAYER_all_tests ${SLUICE_LAYER_cli})
# The fuzz targets (fuzz/): each drives one door, so they see every layer.
set(SLUICE_LAYER_fuzz ${SLUICE_LAYER_cli})

# The public headers (include/sluice/) belong to the layer that implements
# them: an include of one counts as an include of that layer's folder.
# Every header not listed here is core's.
set(SLUICE_PUBLIC_HEADERS_store store.h memory_store.h limiter.h sluice.h)
set(SLUICE_PUBLIC_HEADERS_redis redis_store.h)

# The layer of each target.
set(SLUICE_TARGET_LAYER_sluice_core core)
set(SLUICE_TARGET_LAYER_sluice_store store)
set(SLUICE_TARGET_LAYER_sluice_config_values config_values)
set(SLUICE_TARGET_LAYER_sluice_redis redis)
set(SLUICE_TARGET_LAYER_sluice_config config)
set(SLUICE_TARGET_LAYER_sluice_observe observe)
set(SLUICE_TARGET_LAYER_sluice_policy policy)
set(SLUICE_TARGET_LAYER_sluice_render render)
set(SLUICE_TARGET_LAYER_sluice_http http)
set(SLUICE_TARGET_LAYER_sluice_rls rls)
set(SLUICE_TARGET_LAYER_sluice_simulate simulate)
set(SLUICE_TARGET_LAYER_sluice_cli cli)
set(SLUICE_TARGET_LAYER_sluice cli)

# The layer folders that lie inside `folder` (store: store/redis), in OUT.
function(sluice_inner_layer_folders folder out)
  set(inner)
  foreach(layer ${SLUICE_LAYERS})
    if(SLUICE_LAYER_FOLDER_${layer} MATCHES "^${folder}/")
      list(APPEND inner ${SLUICE_LAYER_FOLDER_${layer}})
    endif()
  endforeach()
  set(${out} ${inner} PARENT_SCOPE)
endfunction()

# Makes ROOT hold the folders of `layer`: a link to src/<folder>, or, for a
# folder holding another layer's folder, a directory of links to its entries
# but that one (it appears only if the layer names it too). Made afresh at
# every configure; CONFIGURE_DEPENDS makes a file added to such a folder
# configure again, so the link to it appears.
function(sluice_make_layer_root layer root)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root})
  set(folders ${SLUICE_LAYER_${layer}})
  list(SORT folders)  # an outer folder before the ones inside it
  foreach(folder ${folders})
    get_filename_component(parent ${root}/${folder} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    sluice_inner_layer_folders(${folder} inner)
    if(NOT inner)
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${root}/${folder} SYMBOLIC)
      continue()
    endif()
    file(MAKE_DIRECTORY ${root}/${folder})
    file(GLOB entries CONFIGURE_DEPENDS LIST_DIRECTORIES true RELATIVE ${PROJECT_SOURCE_DIR}/src
      ${PROJECT_SOURCE_DIR}/src/${folder}/*)
    foreach(entry ${entries})
      if(NOT entry IN_LIST inner)
        file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${entry} ${root}/${entry} SYMBOLIC)
      endif()
    endforeach()
  endforeach()
endfunction()

# An include root for TARGET holding only the folders of its layer (or of
# LAYER when given). PRIVATE: a library's dependents get their own root.
function(sluice_layers target)
  set(layer ${SLUICE_TARGET_LAYER_${target}})
  if(ARGC GREATER 1)
    set(layer ${ARGV1})
  endif()
  if(NOT DEFINED SLUICE_LAYER_${layer})
    message(FATAL_ERROR "sluice_layers: no layer '${layer}' for ${target}")
  endif()
  set(root ${CMAKE_BINARY_DIR}/layers/${layer})
  get_property(made GLOBAL PROPERTY SLUICE_LAYER_ROOTS_MADE)
  if(NOT layer IN_LIST made)
    sluice_make_layer_root(${layer} ${root})
    set_property(GLOBAL APPEND PROPERTY SLUICE_LAYER_ROOTS_MADE ${layer})
  endif()
  target_include_directories(${target} PRIVATE ${root})
endfunction()

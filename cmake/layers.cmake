# The layers of src/ and what each may include: the one place the
# architecture's dependency rule is written down (docs/ARCHITECTURE.md shows
# the same map). Dependencies point downwards only:
#
#   cli -> http, rls -> render, observe -> policy -> config -> core (with store)
#   observe (metrics, logs, the decision observer) sees policy's plans and
#   verdicts, never the doors; util: header-only helpers
#
# sluice_layers(TARGET) gives TARGET an include root that holds links to
# exactly the folders its layer may include, so an upward include does not
# compile; tests/layers.cmake (ctest `layers`) checks every #include against
# the same map and names the offending line.

# Folders of src/ each layer's files may include (their own included).
set(SLUICE_LAYER_core core store util)
set(SLUICE_LAYER_config_values config core store util)
set(SLUICE_LAYER_redis store core config util)
set(SLUICE_LAYER_config config core store util)
set(SLUICE_LAYER_observe observe policy config core store util)
set(SLUICE_LAYER_policy policy config core store util)
set(SLUICE_LAYER_render render policy config core store util)
set(SLUICE_LAYER_http http render policy config observe core store util)
set(SLUICE_LAYER_rls rls render policy config observe core store util)
set(SLUICE_LAYER_simulate cli config core store util)
set(SLUICE_LAYER_cli cli http rls render policy config observe core store util)
# Tests: the fast unit tests see no server layer; the HTTP unit tests the
# http layer; the rest whatever they test.
set(SLUICE_LAYER_unit_tests cli render policy config observe core store util)
set(SLUICE_LAYER_http_tests http render policy config observe core store util)
set(SLUICE_LAYER_redis_tests store core config util)
set(SLUICE_LAYER_all_tests cli http rls render policy config observe core store util)
# The fuzz targets (fuzz/): each drives one door, so they see every layer.
set(SLUICE_LAYER_fuzz cli http rls render policy config observe core store util)
# The layer of each target.
set(SLUICE_TARGET_LAYER_sluice_core core)
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
  # Made afresh at each configure, so that a build tree configured before
  # the map changed gets the folders the map gives now.
  get_property(made GLOBAL PROPERTY SLUICE_LAYER_ROOT_MADE_${layer})
  if(NOT made)
    set_property(GLOBAL PROPERTY SLUICE_LAYER_ROOT_MADE_${layer} TRUE)
    file(REMOVE_RECURSE ${root})  # removes the links, never what they point to
    file(MAKE_DIRECTORY ${root})
    foreach(folder ${SLUICE_LAYER_${layer}})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${root}/${folder} SYMBOLIC)
    endforeach()
  endif()
  target_include_directories(${target} PRIVATE ${root})
endfunction()

# sluice_run(WHAT <text> COMMAND <command...> [ENV <VAR=value...>] [OUT_VAR <var>])
# for the install and package test scripts: runs the command (bounded by 10
# minutes) and fails the test with its output unless it exits 0; its stdout
# goes to <var> when given.
function(sluice_run)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_VAR;WHAT" "COMMAND;ENV")
  set(command ${arg_COMMAND})
  if(arg_ENV)
    set(command ${CMAKE_COMMAND} -E env ${arg_ENV} ${command})
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
    TIMEOUT 600)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " shown "${command}")
    message(FATAL_ERROR "${arg_WHAT} failed (${rc}): ${shown}\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  if(arg_OUT_VAR)
    set(${arg_OUT_VAR} "${out}" PARENT_SCOPE)
  endif()
endfunction()

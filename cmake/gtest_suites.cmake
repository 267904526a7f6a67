# tfw_gtest_suites(TARGET [SERIAL SUITE...] [COSTS SUITE SECONDS...] [PROPERTIES NAME VALUE...])
#
# Registers one ctest test per GoogleTest suite of TARGET ("Pattention.*": every test of the
# suite, in one process), listed from the built program after each build, as
# gtest_discover_tests lists its tests. For a program that loads LibTorch: each process pays
# about 0.25-0.4 s for LibTorch's operators to register themselves before a test runs, and
# tfw_tests' 202 tests are 45 suites. A failing test is still named, in the suite's output
# (ctest --output-on-failure). SERIAL names suites that run alone (RUN_SERIAL: they ask
# whether the machine is idle). COSTS gives the long suites' seconds (alone, on 2 cores), for
# ctest -j to start them first in a clone without CTestCostData.txt. PROPERTIES are set on
# every test, as gtest_discover_tests'. A suite passes or fails as a whole: a program whose
# tests skip themselves (GTEST_SKIP, as the GPU suite's) keeps gtest_discover_tests.
function(tfw_gtest_suites target)
  cmake_parse_arguments(ARG "" "" "SERIAL;COSTS;PROPERTIES" ${ARGN})
  set(ctest_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  # The properties, one a line, passed through a file (a value may hold `=`, as
  # ENVIRONMENT_MODIFICATION's "NAME=set:VALUE"; none may hold `;`, a CMake list's separator).
  # Their hash is on the command line, so that a change of them lists the suites again.
  set(properties_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_properties.txt")
  string(REPLACE ";" "\n" properties_text "${ARG_PROPERTIES}")
  file(GENERATE OUTPUT "${properties_file}" CONTENT "${properties_text}\n")
  string(REPLACE ";" "," serial "${ARG_SERIAL}")
  set(costs "")
  while(ARG_COSTS)
    list(POP_FRONT ARG_COSTS suite seconds)
    list(APPEND costs "${suite}:${seconds}")
  endwhile()
  string(REPLACE ";" "," costs "${costs}")
  string(MD5 properties_hash "${properties_text}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "EXECUTABLE=$<TARGET_FILE:${target}>" -D "OUT=${ctest_file}"
            -D "PROPERTIES_FILE=${properties_file}" -D "PROPERTIES_HASH=${properties_hash}" -D "SERIAL=${serial}"
            -D "COSTS=${costs}"
            -P "${PROJECT_SOURCE_DIR}/cmake/gtest_suites_list.cmake"
    BYPRODUCTS "${ctest_file}"
    VERBATIM)
  # Before the first build, or after a failed one, the list is missing: a test says so.
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake")
  file(WRITE "${include_file}"
       "if(EXISTS [==[${ctest_file}]==])\n  include([==[${ctest_file}]==])\nelse()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

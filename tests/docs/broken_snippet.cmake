# Extracts tests/docs/bad/broken.md and compiles it (syntax only): the
# compile must fail with the snippet's page and line (ctest matches them).
execute_process(COMMAND ${CMAKE_COMMAND} -DPAGE=${PAGE} -DREL=bad/broken.md -DOUT=${WORK}.cpp
                        -DSOURCE_DIR=${SOURCE_DIR} -P ${SOURCE_DIR}/cmake/DocSnippets.cmake RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "extracting ${PAGE} failed")
endif()
string(REPLACE "|" ";" dirs "${INCLUDES}")
set(flags -std=c++20 -fsyntax-only)
foreach(d IN LISTS dirs)
  list(APPEND flags -I${d})
endforeach()
execute_process(COMMAND ${CXX} ${flags} ${WORK}.cpp RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the broken snippet compiled")
endif()

# hf2pte_add_test(NAME SOURCES... LIBS ...): one gtest binary registered with CTest.
# Tests run from the repository root so they can read tests/data/ with relative paths.
function(hf2pte_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT HF2PTE_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE HF2PTE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             HF2PTE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} DISCOVERY_TIMEOUT 60)
endfunction()

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

# hf2pte_flatc_schema(TARGET SCHEMA SUBDIR): generates <build>/generated/SUBDIR/<name>_generated.h
# from our flatbuffers SCHEMA at build time (never checked in) and a target TARGET that
# other folders' objects can depend on. Used by the delegate payload schemas.
function(hf2pte_flatc_schema target schema subdir)
  get_filename_component(stem ${schema} NAME_WE)
  set(out_dir ${PROJECT_BINARY_DIR}/generated/${subdir})
  add_custom_command(
    OUTPUT ${out_dir}/${stem}_generated.h
    COMMAND flatbuffers::flatc --cpp --scoped-enums --force-empty -o ${out_dir} ${schema}
    DEPENDS ${schema} flatbuffers::flatc
    COMMENT "flatc: generating ${subdir}/${stem}_generated.h"
    VERBATIM)
  add_custom_target(${target} DEPENDS ${out_dir}/${stem}_generated.h)
endfunction()

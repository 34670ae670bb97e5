# ragd_add_test(NAME name SOURCES a.cpp b.cpp LIBS lib...)
# One GoogleTest binary per suite, in build/bin, discovered at test time (ctest labels = module).
function(ragd_add_test)
  cmake_parse_arguments(T "" "NAME;LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(TARGET ragd_cuda_module)
    add_dependencies(${T_NAME} ragd_cuda_module)  # the CUDA backend, loaded on a GPU request
  endif()
  gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS "${T_LABEL}" TIMEOUT 600)
endfunction()

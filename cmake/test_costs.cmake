# Which tests `ctest -j` starts first. ctest starts the tests of highest COST first, and once a
# build folder has run them it uses their measured times instead (Testing/Temporary/
# CTestCostData.txt). A clean clone (CI) has no such history, so without these it starts the tests
# in the order they were added, and a long one added late runs alone at the end while the other
# core idles: the asan preset lost about 2 of its 10 test minutes to that.
#
# ml_set_test_costs() at the end of each folder that adds these tests (set_tests_properties sees only
# the current folder's tests before CMake 3.28). The figures are seconds on a 2-core VM, in the
# slowest preset that runs the test; only their order matters.
set(ML_TEST_COSTS
    tools.amx_variants_emu 130  e2e.server.http_load 90  e2e.files 85  e2e.limits.sweep 75
    e2e.llamacpp 75  e2e.run.packing 60  e2e.run.threads-batch 60  e2e.run.same-as-scalar 40
    e2e.server 35  e2e.run.archs 34  kernels.sve_128bit 33  e2e.run.mem32 27  e2e.chat 26
    e2e.hf.templates 26  e2e.hf.errors 24  e2e.server.http_bad_input 24  e2e.hf.tokenizers 23)
# (The fuzz.<name> tests set their own, from ML_FUZZ_SECONDS: fuzz/CMakeLists.txt.)

function(ml_set_test_costs)
  set(costs ${ML_TEST_COSTS})
  list(LENGTH costs n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET costs ${i} name)
    list(GET costs ${j} cost)
    if(TEST ${name})
      set_tests_properties(${name} PROPERTIES COST ${cost})
    endif()
  endforeach()
endfunction()

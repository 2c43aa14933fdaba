# The Windows presets (cmake/toolchains/mingw-w64.cmake) run their tests under wine64 through
# cmake/toolchains/wine-run.sh. Probed once at configure time (this also creates the build's wine
# prefix, about 30 s the first time): when wine cannot start, the unit and e2e tests are not
# registered and one test, win.wine_unavailable, reports SKIP with the reason -- loudly, never as
# a pass (tests/CMakeLists.txt). A wine that fails later makes wine-run.sh exit 77: SKIP too.
set(ML_WINE_OK OFF)
set(ML_WINE_WHY "")
if(ML_TESTS_WITHOUT_WINE)
  set(ML_WINE_WHY "ML_TESTS_WITHOUT_WINE is set")
else()
  execute_process(COMMAND ${CMAKE_CROSSCOMPILING_EMULATOR} cmd /c exit 0
                  RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err TIMEOUT 300)
  if(_rc EQUAL 0)
    set(ML_WINE_OK ON)
  else()
    string(STRIP "${_err}" _err)
    set(ML_WINE_WHY "wine64 cannot start (${_rc}): ${_err}")
  endif()
endif()
if(NOT ML_WINE_OK)
  message(WARNING "krafla: ${ML_WINE_WHY}\nThe Windows build's tests will be SKIPPED (apt-get install wine64).")
endif()

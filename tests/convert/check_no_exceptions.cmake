# cmake -DNM=<nm> -DLIB=<archive> -P check_no_exceptions.cmake
# Fails when any object file of LIB refers to C++ exception machinery: the personality routine
# (unwind tables of code built with exceptions), throwing or catching (__cxa_*), libstdc++'s
# __throw_* helpers (what std containers call on a failed allocation or bad length), or the
# throwing operator new (std::bad_alloc); operator new(std::nothrow) is allowed. Used by the
# convert.no_exceptions test on ml_convert_lib, which reports every failure as a status.
if(NOT NM OR NOT LIB)
  message(FATAL_ERROR "usage: cmake -DNM=<nm> -DLIB=<archive> -P check_no_exceptions.cmake")
endif()
execute_process(COMMAND ${NM} -A ${LIB} OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${LIB} failed (${_rc}): ${_err}")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
set(_bad "")
set(_n 0)
foreach(_line IN LISTS _lines)
  if(_line STREQUAL "")
    continue()
  endif()
  math(EXPR _n "${_n} + 1")
  # "archive:object: [value] type symbol"; the symbol is the last field.
  string(REGEX MATCH "[^ ]+$" _sym "${_line}")
  if(_sym MATCHES "__gxx_personality_v0|^__cxa_(throw|rethrow|allocate_exception|free_exception|begin_catch|end_catch|call_unexpected)$|^_ZSt[0-9]+__throw_|^_Zn[wa][jm](St11align_val_t)?$")
    list(APPEND _bad "${_line}")
  endif()
endforeach()
if(_n EQUAL 0)
  message(FATAL_ERROR "${NM} printed no symbols for ${LIB}")
endif()
if(_bad)
  list(JOIN _bad "\n  " _list)
  message(FATAL_ERROR "${LIB} uses C++ exception machinery:\n  ${_list}")
endif()
message(STATUS "${LIB}: ${_n} symbols, no exception machinery")

cmake_minimum_required(VERSION 3.25)  # policies: quoted arguments are not variables
# api.include_roots: each layer's include root (cmake/include_roots.cmake) exposes its own layer and
# the ones below, and nothing above; the apps' (the public include folder) exposes krafla.h alone.
# Run: cmake -DCXX=... -DAPI=<src/engine/include> -DINC=<build/inc> -DWORK=<dir> -P this file.
set(_cases
  # root     header                  expected
  "API|krafla.h|ok"
  "API|core/status.h|fail"
  "API|model/model.h|fail"
  "API|src/model/model.h|fail"
  "core|core/status.h|ok"
  "core|kernels/numerics.h|fail"
  "kernels|core/types.h|ok"
  "kernels|ops/matvec.h|fail"
  "ops|ops/attention.h|ok"
  "ops|model/model.h|fail"
  "model|model/model.h|ok"
  "model|engine/stop_filter.h|fail"
  "model|krafla.h|fail"
  "engine|engine/stop_filter.h|ok")
file(MAKE_DIRECTORY ${WORK})
set(_bad 0)
foreach(c ${_cases})
  string(REPLACE "|" ";" c ${c})
  list(GET c 0 root)
  list(GET c 1 header)
  list(GET c 2 want)
  if(root STREQUAL "API")
    set(dir ${API})
  else()
    set(dir ${INC}/${root})
  endif()
  string(MAKE_C_IDENTIFIER "${root}_${header}" id)
  file(WRITE ${WORK}/${id}.cpp "#include \"${header}\"\n")
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${dir} ${WORK}/${id}.cpp RESULT_VARIABLE rc
                  OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(got ok)
  else()
    set(got fail)
  endif()
  if(NOT got STREQUAL want)
    message("include root ${root}: #include \"${header}\" should ${want} but did ${got}")
    set(_bad 1)
  endif()
endforeach()
if(_bad)
  message(FATAL_ERROR "an include root exposes the wrong headers")
endif()
message("every include root exposes exactly its layers")

# Per-layer include roots. Each layer compiles against build/inc/<layer>/, a folder of symlinks to
# its own sources and the layers below it (plus the public krafla_types.h), so an upward include
# -- ops including model/, an app including anything but krafla.h -- fails to compile:
#   core     core/
#   kernels  core/ kernels/
#   ops      core/ kernels/ ops/
#   model    core/ kernels/ ops/ model/
#   convert  ... model/ convert/
#   engine   ... convert/ engine/   (the implementation of the public API)
# The apps (native/), the wasm module and the public-API tests see only ML_API_INCLUDE:
# src/engine/include, which holds krafla.h and krafla_types.h.
set(ML_INC ${CMAKE_BINARY_DIR}/inc)
set(ML_API_INCLUDE ${CMAKE_SOURCE_DIR}/src/engine/include)

set(_ml_root_links krafla_types.h=${ML_API_INCLUDE}/krafla_types.h)
foreach(layer core kernels ops model convert engine)
  if(layer STREQUAL "kernels")
    list(APPEND _ml_root_links kernels=${CMAKE_SOURCE_DIR}/kernels)
  else()
    list(APPEND _ml_root_links ${layer}=${CMAKE_SOURCE_DIR}/src/${layer})
  endif()
  file(MAKE_DIRECTORY ${ML_INC}/${layer})
  foreach(link ${_ml_root_links})
    string(REPLACE "=" ";" _kv ${link})
    list(GET _kv 0 _name)
    list(GET _kv 1 _target)
    file(CREATE_LINK ${_target} ${ML_INC}/${layer}/${_name} SYMBOLIC)
  endforeach()
endforeach()

# ml_layer_includes(TARGET LAYER): TARGET's sources see LAYER's root (PRIVATE: nothing propagates
# to the targets that link it).
function(ml_layer_includes target layer)
  target_include_directories(${target} PRIVATE ${ML_INC}/${layer})
endfunction()

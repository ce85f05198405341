# Checks that the library's layers depend downward only (docs/conventions.md draws them):
#
#   cmake -DSRC=<src folder> -P check_layering.cmake
#
# Every `#include "folder/..."` under SRC is read. A file may include headers of its own top
# folder and of any folder in a lower layer; an include of a higher layer, or of another folder
# of the same layer, is reported as "file:line: ..." and the script fails. A top folder that is
# not in the table below is an error too, so a new folder has to be given its place.
#
# Inside tensor/, which is one layer, its parts are ordered the same way (TENSOR_PARTS below):
# the per-element rules both backends share, the Tensor handle, the kernels' declarations and
# their dispatch, the CPU and CUDA kernels, and the ops with autograd on top. A part may include
# its own part and the parts below it; the two kernel folders never include each other.

# The layers, lowest first, each a space-separated list of top folders: a folder may use every
# folder listed on the lines above its own.
set(LAYERS
  "core"                           # devices, dtypes, storage, allocators, errors, RNG, CUDA runtime
  "util"                           # timers and the trace
  "tensor"                         # Tensor with its autograd and ops: one unit, as PyTorch's ATen
  "nn optim data"                  # modules, optimisers, datasets and loaders
  "parallel distributed amp io"    # DataParallel, DDP and process groups, mixed precision, checkpoints
  "distributed_checkpoint"         # sharded checkpoints: FSDP's shards written and read with io's files
  "lockstep.h")                    # the one header a program includes

# The parts of tensor/, lowest first: a folder (ending in "/") holds everything under it, a file
# only itself, and the last part holds the rest of tensor/. Ops and autograd use each other (a
# backward pass calls ops), as in PyTorch's ATen, so they share the top part.
set(TENSOR_PARTS
  "tensor/ops/rules/"                                            # per-element rules, shared types
  "tensor/tensor.h tensor/tensor_impl.h tensor/strided_loop.h"   # the Tensor handle, its loops
  "tensor/ops/dispatch/"                                         # kernel pairs and their dispatch
  "tensor/ops/cpu/ tensor/ops/cuda/"                             # the kernels of each backend
  "tensor/")                                                     # ops, autograd, autocast, Tensor's methods

if(NOT SRC)
  message(FATAL_ERROR "check_layering: pass -DSRC=<the library's src folder>")
endif()
get_filename_component(SRC "${SRC}" ABSOLUTE)
# Files are named from the folder SRC itself ("src/nn/linear.cpp:3").
get_filename_component(root "${SRC}" NAME)

# layer_of(<name> <result>): the layer index of a top folder (or top file), or -1.
function(layer_of name result)
  set(index 0)
  foreach(layer ${LAYERS})
    string(REPLACE " " "|" alternatives "${layer}")
    if(name MATCHES "^(${alternatives})$")
      set(${result} ${index} PARENT_SCOPE)
      return()
    endif()
    math(EXPR index "${index} + 1")
  endforeach()
  set(${result} -1 PARENT_SCOPE)
endfunction()

# The layer's folders, for messages.
function(layer_name index result)
  list(GET LAYERS ${index} layer)
  string(REPLACE " " ", " layer "${layer}")
  set(${result} "${layer}" PARENT_SCOPE)
endfunction()

# tensor_part_of(<path> <index> <entry>): the part of tensor/ that holds <path>, and the folder
# or file of that part that matched it.
function(tensor_part_of path index_result entry_result)
  set(index 0)
  foreach(part ${TENSOR_PARTS})
    string(REPLACE " " ";" entries "${part}")
    foreach(entry ${entries})
      string(LENGTH "${entry}" length)
      string(SUBSTRING "${path}" 0 ${length} prefix)
      if((entry MATCHES "/$" AND prefix STREQUAL entry) OR path STREQUAL entry)
        set(${index_result} ${index} PARENT_SCOPE)
        set(${entry_result} "${entry}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
    math(EXPR index "${index} + 1")
  endforeach()
endfunction()

file(GLOB_RECURSE sources RELATIVE "${SRC}" "${SRC}/*.h" "${SRC}/*.cpp" "${SRC}/*.cu" "${SRC}/*.cuh")
list(SORT sources)
set(violations "")
set(checked 0)
foreach(source ${sources})
  string(REGEX REPLACE "/.*" "" from "${source}")
  layer_of("${from}" from_layer)
  if(from_layer EQUAL -1)
    list(APPEND violations "${root}/${source}: '${from}' has no layer; give it one in tests/build/check_layering.cmake and docs/conventions.md")
    continue()
  endif()
  file(STRINGS "${SRC}/${source}" lines)
  set(line_number 0)
  foreach(line IN LISTS lines)
    math(EXPR line_number "${line_number} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\"")
      continue()
    endif()
    set(header "${CMAKE_MATCH_1}")
    math(EXPR checked "${checked} + 1")
    string(REGEX REPLACE "/.*" "" to "${header}")
    if(to STREQUAL from)
      if(from STREQUAL "tensor")
        tensor_part_of("${source}" from_part from_entry)
        tensor_part_of("${header}" to_part to_entry)
        list(GET TENSOR_PARTS ${from_part} from_name)
        list(GET TENSOR_PARTS ${to_part} to_name)
        if(to_part GREATER from_part)
          list(APPEND violations "${root}/${source}:${line_number}: includes \"${header}\" from a higher part of tensor/ (${to_name}) than its own (${from_name})")
        elseif(to_part EQUAL from_part AND from_entry MATCHES "/$" AND NOT to_entry STREQUAL from_entry)
          list(APPEND violations "${root}/${source}:${line_number}: includes \"${header}\" from '${to_entry}', a neighbour in its own part of tensor/ (${from_name}), where only lower parts may be used")
        endif()
      endif()
      continue()
    endif()
    layer_of("${to}" to_layer)
    layer_name(${from_layer} from_name)
    if(to_layer EQUAL -1)
      list(APPEND violations "${root}/${source}:${line_number}: includes \"${header}\", which is in no layer")
    elseif(to_layer GREATER from_layer)
      layer_name(${to_layer} to_name)
      list(APPEND violations "${root}/${source}:${line_number}: includes \"${header}\" from a higher layer (${to_name}) than its own (${from_name})")
    elseif(to_layer EQUAL from_layer)
      list(APPEND violations "${root}/${source}:${line_number}: includes \"${header}\" from '${to}', a folder of its own layer (${from_name}), where only lower layers may be used")
    endif()
  endforeach()
endforeach()

if(violations)
  # One line per include, unwrapped, so each reads as file:line; then the failure.
  foreach(violation IN LISTS violations)
    message("${violation}")
  endforeach()
  list(LENGTH violations count)
  message(FATAL_ERROR "${count} include(s) against the layering of docs/conventions.md: a folder uses only "
                      "lower layers (the table is in tests/build/check_layering.cmake)")
endif()
message(STATUS "check_layering: ${checked} includes in ${SRC} depend downward only")

# Doxygen checks the members of a header only when the header itself is documented, so an
# undocumented header would slip past the docs build. This check closes that gap: every header
# under src/ and chapters/common/ must start its documentation with "/// \file".
#   cmake -DSOURCE_DIR=path -P check_file_comments.cmake
file(GLOB_RECURSE headers "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/chapters/common/*.h")
set(missing "")
foreach(header ${headers})
  file(READ ${header} text)
  if(NOT text MATCHES "/// \\\\file")
    list(APPEND missing ${header})
  endif()
endforeach()
if(missing)
  string(REPLACE ";" "\n  " missing "${missing}")
  message(FATAL_ERROR "These headers have no '/// \\file' comment, so Doxygen would skip them:\n  ${missing}")
endif()
list(LENGTH headers count)
message("${count} headers, each with a /// \\file comment")

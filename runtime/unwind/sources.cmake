# The unwind part of libpathscope.so: included by the top-level CMakeLists.txt.  A file added to
# or split out of runtime/unwind/ is listed here only.
set(PS_UNWIND_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/source_unwind.c
  ${CMAKE_CURRENT_LIST_DIR}/modules.c
  ${CMAKE_CURRENT_LIST_DIR}/cfi.c
  ${CMAKE_CURRENT_LIST_DIR}/rules.c
  ${CMAKE_CURRENT_LIST_DIR}/walk.c
  ${CMAKE_CURRENT_LIST_DIR}/traversal.c
  ${CMAKE_CURRENT_LIST_DIR}/unwind_out.c
  ${CMAKE_CURRENT_LIST_DIR}/thunk.c)

# The heap part of libpathscope.so: included by the top-level CMakeLists.txt.  A file added to
# or split out of runtime/heap/ is listed here only.
set(PS_HEAP_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/source_heap.c
  ${CMAKE_CURRENT_LIST_DIR}/heap.c
  ${CMAKE_CURRENT_LIST_DIR}/heap_out.c)

# The core part of libpathscope.so: included by the top-level CMakeLists.txt.  A file added to
# or split out of runtime/core/ is listed here only.
set(PS_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/source.c
  ${CMAKE_CURRENT_LIST_DIR}/clock.c
  ${CMAKE_CURRENT_LIST_DIR}/fmt.c
  ${CMAKE_CURRENT_LIST_DIR}/lifecycle.c
  ${CMAKE_CURRENT_LIST_DIR}/ending.c
  ${CMAKE_CURRENT_LIST_DIR}/cct.c
  ${CMAKE_CURRENT_LIST_DIR}/threads.c
  ${CMAKE_CURRENT_LIST_DIR}/timeline.c
  ${CMAKE_CURRENT_LIST_DIR}/warn.c
  ${CMAKE_CURRENT_LIST_DIR}/ownfd.c
  ${CMAKE_CURRENT_LIST_DIR}/runid.c
  ${CMAKE_CURRENT_LIST_DIR}/proc.c)

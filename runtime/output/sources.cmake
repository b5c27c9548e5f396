# The output part of libpathscope.so: included by the top-level CMakeLists.txt.  A file added to
# or split out of runtime/output/ is listed here only.
set(PS_OUTPUT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/outdir.c
  ${CMAKE_CURRENT_LIST_DIR}/pathsfile.c
  ${CMAKE_CURRENT_LIST_DIR}/rankfile.c
  ${CMAKE_CURRENT_LIST_DIR}/peers.c)

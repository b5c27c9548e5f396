# The sample part of libpathscope.so: included by the top-level CMakeLists.txt.  A file added to
# or split out of runtime/sample/ is listed here only.
set(PS_SAMPLE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/source_sample.c
  ${CMAKE_CURRENT_LIST_DIR}/sample.c
  ${CMAKE_CURRENT_LIST_DIR}/sample_out.c
  ${CMAKE_CURRENT_LIST_DIR}/sigprof.c)

# The kernel part of libpathscope.so: included by the top-level CMakeLists.txt.  A file added to
# or split out of runtime/kernel/ is listed here only.
set(PS_KERNEL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/source_kernel.c
  ${CMAKE_CURRENT_LIST_DIR}/kernel.c
  ${CMAKE_CURRENT_LIST_DIR}/kernel_out.c
  ${CMAKE_CURRENT_LIST_DIR}/sysnames.c
  ${PS_SYSNAMES_C})
# The collector (pathscope-kcollect), a program of its own (built only when libbpf, clang and
# bpftool are there: CMakeLists.txt).
set(PS_KCOLLECT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/kc_main.c
  ${CMAKE_CURRENT_LIST_DIR}/kc_load.c
  ${CMAKE_CURRENT_LIST_DIR}/kc_track.c
  ${CMAKE_CURRENT_LIST_DIR}/kc_snapshot.c
  ${CMAKE_CURRENT_LIST_DIR}/kc_server.c
  ${CMAKE_CURRENT_LIST_DIR}/sysnames.c
  ${PS_SYSNAMES_C})

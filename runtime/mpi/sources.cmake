# The mpi part of libpathscope.so: included by the top-level CMakeLists.txt.  A file added to
# or split out of runtime/mpi/ is listed here only.
set(PS_MPI_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/source_mpi.c
  ${CMAKE_CURRENT_LIST_DIR}/paths.c
  ${CMAKE_CURRENT_LIST_DIR}/mpi_out.c
  ${CMAKE_CURRENT_LIST_DIR}/registry.c
  ${CMAKE_CURRENT_LIST_DIR}/families.c
  ${CMAKE_CURRENT_LIST_DIR}/volume.c
  ${CMAKE_CURRENT_LIST_DIR}/naming.c
  ${CMAKE_CURRENT_LIST_DIR}/completion.c
  ${CMAKE_CURRENT_LIST_DIR}/lifecycle_mpi.c
  ${CMAKE_CURRENT_LIST_DIR}/reduce.c
  ${CMAKE_CURRENT_LIST_DIR}/fortran_support.c)

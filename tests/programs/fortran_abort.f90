! MPI_ABORT from Fortran: rank 0 sends one message, then aborts with error code 7 while the
! other ranks wait in a barrier.  tests/e2e/test_fortran.py checks rank 0's file says
! "abort 7" and holds the send (the Fortran mpi_abort_ wrapper writes it before the library's
! abort, as the C MPI_Abort wrapper does).
program fortran_abort
  use mpi
  implicit none
  integer :: ierr, rank, buf(10)
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  buf = 0
  if (rank == 0) then
    call MPI_SEND(buf, 10, MPI_INTEGER, 1, 1, MPI_COMM_WORLD, ierr)
    call MPI_ABORT(MPI_COMM_WORLD, 7, ierr)
  else if (rank == 1) then
    call MPI_RECV(buf, 10, MPI_INTEGER, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_FINALIZE(ierr)
end program fortran_abort

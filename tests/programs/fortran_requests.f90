! Request accounting and F90 datatypes through the Fortran bindings (use mpi, 2 ranks),
! checked by tests/e2e/test_transparency.py: exact counts, and the output compared with a run
! without pathscope.  Every choice buffer is a rank-1 INTEGER array.
!
!  A  rank 1 posts two MPI_IRECVs of 50 INTEGER (200 B) and frees them with
!     MPI_REQUEST_FREE; rank 0 MPI_SSENDs 5 INTEGER (20 B) to each: W sent 2 msgs 40 B,
!     freed_recvs 2, capacity 400, nothing received.  Rank 0 MPI_ISENDs 2 INTEGER and frees
!     the request (freed_sends 1); rank 1 receives them (1 msg 8 B).
!  B  rank 1: a persistent receive never started: MPI_WAIT, MPI_TEST, MPI_WAITALL with
!     MPI_REQUEST_NULL, MPI_REQUEST_FREE; nothing counted.  Then started once against a
!     persistent send of 3 INTEGER from rank 0: 1 msg 12 B each way of the count.
!  C  rank 1: MPI_TYPE_CREATE_F90_REAL / _COMPLEX / _INTEGER, MPI_TYPE_GET_ENVELOPE,
!     MPI_TYPE_GET_CONTENTS with exactly the entries the envelope gives, MPI_TYPE_SIZE.
program fortran_requests
  use mpi
  implicit none
  integer :: ierr, rank, i, p, t, ni, na, nd, comb, sz
  integer :: st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2), reqs(2), req
  integer :: fbuf(100), ibuf(64), parms(2), dts(1)
  integer(kind=MPI_ADDRESS_KIND) :: adds(1)
  logical :: lflag

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  ibuf = 0

  ! A
  do i = 1, 2
    if (rank == 1) then
      call MPI_IRECV(fbuf(1 + 50 * (i - 1)), 50, MPI_INTEGER, 0, 10 + i, MPI_COMM_WORLD, req, ierr)
      call MPI_REQUEST_FREE(req, ierr)
    else
      call MPI_SSEND(ibuf, 5, MPI_INTEGER, 1, 10 + i, MPI_COMM_WORLD, ierr)
    end if
  end do
  if (rank == 0) then
    call MPI_ISEND(ibuf, 2, MPI_INTEGER, 1, 20, MPI_COMM_WORLD, req, ierr)
    call MPI_REQUEST_FREE(req, ierr)
  else
    call MPI_RECV(ibuf, 64, MPI_INTEGER, 0, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)

  ! B
  if (rank == 1) then
    call MPI_RECV_INIT(ibuf, 10, MPI_INTEGER, 0, 30, MPI_COMM_WORLD, p, ierr)
    call MPI_WAIT(p, st, ierr)
    print '(a, l1)', 'B wait: empty status ', st(MPI_SOURCE) == MPI_ANY_SOURCE
    call MPI_TEST(p, lflag, MPI_STATUS_IGNORE, ierr)
    print '(a, l1)', 'B test: flag ', lflag
    reqs(1) = MPI_REQUEST_NULL
    reqs(2) = p
    call MPI_WAITALL(2, reqs, sts, ierr)
    print '(a, l1)', 'B waitall: empty status ', sts(MPI_SOURCE, 2) == MPI_ANY_SOURCE
    call MPI_START(p, ierr)
    call MPI_WAIT(p, MPI_STATUS_IGNORE, ierr)
    call MPI_REQUEST_FREE(p, ierr)
  else
    call MPI_SEND_INIT(ibuf, 3, MPI_INTEGER, 1, 30, MPI_COMM_WORLD, p, ierr)
    call MPI_START(p, ierr)
    call MPI_WAIT(p, MPI_STATUS_IGNORE, ierr)
    call MPI_REQUEST_FREE(p, ierr)
  end if
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)

  ! C
  if (rank == 1) then
    do i = 1, 3
      if (i == 1) call MPI_TYPE_CREATE_F90_REAL(6, 30, t, ierr)
      if (i == 2) call MPI_TYPE_CREATE_F90_COMPLEX(15, MPI_UNDEFINED, t, ierr)
      if (i == 3) call MPI_TYPE_CREATE_F90_INTEGER(9, t, ierr)
      call MPI_TYPE_GET_ENVELOPE(t, ni, na, nd, comb, ierr)
      parms = -1
      call MPI_TYPE_GET_CONTENTS(t, ni, na, nd, parms, adds, dts, ierr)
      call MPI_TYPE_SIZE(t, sz, ierr)
      print '(a, i0, a, 3(1x, i0), a, l1, a, 2(1x, i0), a, i0)', 'C type ', i, ': envelope', &
        ni, na, nd, ' f90 combiner ', comb == MPI_COMBINER_F90_REAL .or. &
        comb == MPI_COMBINER_F90_COMPLEX .or. comb == MPI_COMBINER_F90_INTEGER, &
        ', contents', parms, ', size ', sz
    end do
  end if
  call MPI_FINALIZE(ierr)
end program fortran_requests

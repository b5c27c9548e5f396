! Fortran truth program (include 'mpif.h'): fortran_counts.f90 with "use mpi" replaced by
! "include 'mpif.h'" and nothing else changed; see fortran_counts.f90 for what each section
! sends.  tests/e2e/test_fortran.py checks it against the same numbers: keep it in step.
!
!  A  pairs (0,1) (2,3), 5 rounds: even sends 100 MPI_INTEGER (400 B) and receives, with
!     MPI_STATUS_IGNORE into a 100-element buffer, what odd sends back: 50 MPI_INTEGER
!     (200 B); then odd sends 3 MPI_2INTEGER (24 B), received by even with a real status.
!  B  every rank ISENDs 8 MPI_2INTEGER (64 B) to each other rank and IRECVs them with room
!     for 16, one MPI_WAITALL with MPI_STATUSES_IGNORE; ring: 1 MPI_INTEGER ISEND right /
!     IRECV left, two MPI_WAIT with MPI_STATUS_IGNORE; 2 MPI_INTEGER (8 B) ISEND/IRECV with
!     both neighbours, four MPI_WAITANY (1-based index).
!  C  persistent: SEND_INIT / RECV_INIT of 4 MPI_INTEGER (16 B) around the ring, 3 rounds of
!     MPI_STARTALL + MPI_WAITALL, two MPI_REQUEST_FREE.
!  D  on W: ALLREDUCE of 20 MPI_INTEGER with MPI_IN_PLACE, ALLGATHER of 5 MPI_INTEGER with
!     MPI_IN_PLACE, BCAST of 25 MPI_INTEGER from 0, one BARRIER, one more BARRIER between
!     MPI_PCONTROL(0) and MPI_PCONTROL(1), two MPI_WTIME.
!  E  MPI_COMM_SPLIT (color rank/2), MPI_COMM_DUP, MPI_CART_CREATE 2x2 periods (T,F) no
!     reorder; one ALLREDUCE (in place) of 1 MPI_INTEGER on each; one SENDRECV of 6
!     MPI_INTEGER around the cart ring with MPI_STATUS_IGNORE; MPI_COMM_FREE of all three.
program fortran_mpifh
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nranks, partner, k, i, n, idx, left, right, cnt
  integer :: ibuf(100), st(MPI_STATUS_SIZE), i6(6), sbuf(16), rbig(96)
  integer :: reqs(6), rreq(2), areq(4), preq(2), abuf(4), asend(2), o1(1), r1(1)
  integer :: psend(4), precv(4), ared(20), gat(20), bc(25), s1(1), sr_s(6), sr_r(6)
  integer :: half, dupc, cart, dims(2)
  logical :: periods(2)
  double precision :: t0, t1

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  if (nranks /= 4) call MPI_ABORT(MPI_COMM_WORLD, 3, ierr)
  t0 = MPI_WTIME()
  right = mod(rank + 1, 4)
  left = mod(rank + 3, 4)

  ! ---- A: blocking pairs ----
  partner = ieor(rank, 1)
  ibuf = rank
  do k = 1, 5
    if (mod(rank, 2) == 0) then
      call MPI_SEND(ibuf, 100, MPI_INTEGER, partner, 10 + k, MPI_COMM_WORLD, ierr)
      call MPI_RECV(ibuf, 100, MPI_INTEGER, partner, 20 + k, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
    else
      call MPI_RECV(ibuf, 100, MPI_INTEGER, partner, 10 + k, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
      call MPI_SEND(ibuf, 50, MPI_INTEGER, partner, 20 + k, MPI_COMM_WORLD, ierr)
    end if
  end do
  if (mod(rank, 2) == 0) then
    call MPI_RECV(ibuf, 10, MPI_2INTEGER, partner, 30, MPI_COMM_WORLD, st, ierr)
    call MPI_GET_COUNT(st, MPI_2INTEGER, cnt, ierr)
    if (cnt /= 3 .or. st(MPI_SOURCE) /= partner .or. st(MPI_TAG) /= 30) &
      call MPI_ABORT(MPI_COMM_WORLD, 4, ierr)
  else
    i6 = rank
    call MPI_SEND(i6, 3, MPI_2INTEGER, partner, 30, MPI_COMM_WORLD, ierr)
  end if

  ! ---- B: nonblocking ----
  sbuf = rank
  n = 0
  do i = 0, 3
    if (i == rank) cycle
    n = n + 1
    call MPI_IRECV(rbig(32 * (n - 1) + 1), 16, MPI_2INTEGER, i, 40, MPI_COMM_WORLD, &
                   reqs(n), ierr)
  end do
  do i = 0, 3
    if (i == rank) cycle
    n = n + 1
    call MPI_ISEND(sbuf, 8, MPI_2INTEGER, i, 40, MPI_COMM_WORLD, reqs(n), ierr)
  end do
  call MPI_WAITALL(6, reqs, MPI_STATUSES_IGNORE, ierr)
  o1 = rank
  call MPI_IRECV(r1, 1, MPI_INTEGER, left, 50, MPI_COMM_WORLD, rreq(1), ierr)
  call MPI_ISEND(o1, 1, MPI_INTEGER, right, 50, MPI_COMM_WORLD, rreq(2), ierr)
  call MPI_WAIT(rreq(1), MPI_STATUS_IGNORE, ierr)
  call MPI_WAIT(rreq(2), MPI_STATUS_IGNORE, ierr)
  if (r1(1) /= left) call MPI_ABORT(MPI_COMM_WORLD, 5, ierr)
  asend = rank
  call MPI_IRECV(abuf(1), 2, MPI_INTEGER, left, 60, MPI_COMM_WORLD, areq(1), ierr)
  call MPI_IRECV(abuf(3), 2, MPI_INTEGER, right, 60, MPI_COMM_WORLD, areq(2), ierr)
  call MPI_ISEND(asend, 2, MPI_INTEGER, right, 60, MPI_COMM_WORLD, areq(3), ierr)
  call MPI_ISEND(asend, 2, MPI_INTEGER, left, 60, MPI_COMM_WORLD, areq(4), ierr)
  do i = 1, 4
    call MPI_WAITANY(4, areq, idx, MPI_STATUS_IGNORE, ierr)
    if (idx < 1 .or. idx > 4) call MPI_ABORT(MPI_COMM_WORLD, 6, ierr)
  end do

  ! ---- C: persistent ----
  psend = rank
  call MPI_SEND_INIT(psend, 4, MPI_INTEGER, right, 70, MPI_COMM_WORLD, preq(1), ierr)
  call MPI_RECV_INIT(precv, 4, MPI_INTEGER, left, 70, MPI_COMM_WORLD, preq(2), ierr)
  do k = 1, 3
    call MPI_STARTALL(2, preq, ierr)
    call MPI_WAITALL(2, preq, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_REQUEST_FREE(preq(1), ierr)
  call MPI_REQUEST_FREE(preq(2), ierr)

  ! ---- D: collectives ----
  ared = 1
  call MPI_ALLREDUCE(MPI_IN_PLACE, ared, 20, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (ared(20) /= 4) call MPI_ABORT(MPI_COMM_WORLD, 7, ierr)
  gat(5 * rank + 1:5 * rank + 5) = rank
  call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gat, 5, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  if (gat(20) /= 3) call MPI_ABORT(MPI_COMM_WORLD, 8, ierr)
  bc = rank
  call MPI_BCAST(bc, 25, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (bc(25) /= 0) call MPI_ABORT(MPI_COMM_WORLD, 9, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_PCONTROL(0)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_PCONTROL(1)

  ! ---- E: communicators ----
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, rank / 2, rank, half, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, dupc, ierr)
  dims = 2
  periods(1) = .true.
  periods(2) = .false.
  call MPI_CART_CREATE(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  s1 = 1
  call MPI_ALLREDUCE(MPI_IN_PLACE, s1, 1, MPI_INTEGER, MPI_SUM, half, ierr)
  if (s1(1) /= 2) call MPI_ABORT(MPI_COMM_WORLD, 10, ierr)
  s1 = 1
  call MPI_ALLREDUCE(MPI_IN_PLACE, s1, 1, MPI_INTEGER, MPI_SUM, dupc, ierr)
  s1 = 1
  call MPI_ALLREDUCE(MPI_IN_PLACE, s1, 1, MPI_INTEGER, MPI_SUM, cart, ierr)
  if (s1(1) /= 4) call MPI_ABORT(MPI_COMM_WORLD, 11, ierr)
  sr_s = rank
  call MPI_SENDRECV(sr_s, 6, MPI_INTEGER, right, 80, sr_r, 6, MPI_INTEGER, left, 80, cart, &
                    MPI_STATUS_IGNORE, ierr)
  if (sr_r(6) /= left) call MPI_ABORT(MPI_COMM_WORLD, 12, ierr)
  call MPI_COMM_FREE(half, ierr)
  call MPI_COMM_FREE(dupc, ierr)
  call MPI_COMM_FREE(cart, ierr)

  t1 = MPI_WTIME()
  if (t1 < t0) call MPI_ABORT(MPI_COMM_WORLD, 13, ierr)
  call MPI_FINALIZE(ierr)
end program fortran_mpifh

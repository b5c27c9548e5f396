! A Fortran module procedure for probes (tests/e2e/test_probe.py): probe_mod::work is called
! 7 times from the program and 3 times from probe_mod::twice (10 in all); gfortran names it
! __probe_mod_MOD_work, which pathscope shows as probe_mod::work.  Prints `probe_fortran
! work=10 total=T`.
module probe_mod
contains
  subroutine work(total, n)
    double precision, intent(inout) :: total
    integer, intent(in) :: n
    integer :: i
    do i = 1, n
      total = total + sqrt(dble(i))
    end do
  end subroutine work

  subroutine twice(total)
    double precision, intent(inout) :: total
    integer :: k
    do k = 1, 3
      call work(total, 1000)
    end do
  end subroutine twice
end module probe_mod

program probe_fortran
  use probe_mod
  double precision :: total
  integer :: k
  total = 0
  do k = 1, 7
    call work(total, 100000)
  end do
  call twice(total)
  print '(a,f0.1)', 'probe_fortran work=10 total=', total
end program probe_fortran

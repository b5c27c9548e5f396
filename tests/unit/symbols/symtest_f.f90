! Fortran part of the symbolizer test: a module procedure (__sym_mod_MOD_scale becomes
! sym_mod::scale) and an external (ext_ keeps its underscore).  Lines are found by MARK.
module sym_mod
contains
  subroutine scale(x)
    real, intent(inout) :: x
    x = x * 2.0
  end subroutine scale
end module sym_mod

subroutine ext(x)
  real, intent(inout) :: x
  x = x + 1.0
end subroutine ext

program symtest_f
  use sym_mod
  real :: v
  v = 3.0
  call scale(v) ! MARK:main-calls-scale
  call ext(v)
  print *, v
end program symtest_f

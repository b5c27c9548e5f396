! Heap profiling of Fortran (tests/e2e/test_heap.py): ALLOCATE and DEALLOCATE reach malloc
! and free; 10 arrays of 1000 doubles from heap_work.
module heap_mod
contains
  subroutine heap_work(total)
    double precision, intent(inout) :: total
    double precision, allocatable :: a(:)
    integer :: i
    do i = 1, 10
      allocate(a(1000))
      a = i
      total = total + sum(a)
      deallocate(a)
    end do
  end subroutine heap_work
end module heap_mod

program fortran_heap
  use heap_mod
  double precision :: total
  total = 0
  call heap_work(total)
  print '(a,f0.1)', 'truth total=', total
end program fortran_heap

! example.f90 -- threadteam from Fortran: a fork whose jobs run
! tt_for_ranges, a team scope whose sections meet at barriers, and
! tt_external handing the width to an OpenMP region. Every result is
! checked; the program stops with a non-zero code on the first wrong one.
!
! Build against an installed threadteam:
!   gfortran -fopenmp example.f90 $(pkg-config --cflags --libs threadteam-fortran)
module example_kernels
  use, intrinsic :: iso_c_binding
  use threadteam
  !$ use omp_lib
  implicit none

  integer(c_size_t), parameter :: n = 200000_c_size_t
  real(c_double), allocatable, target :: x(:)
  integer(c_int), allocatable, target :: hits(:)
  ! First index (0-based offset) of each fork job's half of x.
  integer(c_size_t), target :: offsets(0:1)

  ! The team scope: partial sums per rank, the total, what each rank read.
  integer, parameter :: max_ranks = 256
  real(c_double), target :: partial(0:max_ranks - 1), seen(0:max_ranks - 1)
  real(c_double), target :: total
  integer(c_int), target :: scope_size = -1, section_size = -1
  integer(c_int), target :: ext_width = -1, ext_team = -1

contains

  !> tt_for_ranges body: doubles x and counts visits over [begin, end) of
  !> the half whose offset arg points to.
  recursive subroutine scale_range(arg, begin, end) bind(c)
    type(c_ptr), value :: arg
    integer(c_size_t), value :: begin, end
    integer(c_size_t), pointer :: off
    integer(c_size_t) :: i
    call c_f_pointer(arg, off)
    do i = off + begin + 1, off + end
      x(i) = 2.0_c_double * x(i)
      hits(i) = hits(i) + 1
    end do
  end subroutine scale_range

  !> tt_fork job i: its half of x, with its child token's share.
  recursive subroutine half_job(arg, i, child) bind(c)
    type(c_ptr), value :: arg
    integer(c_int), value :: i
    type(c_ptr), value :: child
    type(tt_exec), pointer :: ex
    integer(c_int) :: rc
    ex => tt_exec_from_ptr(child)
    ! Half 0 in static ranges, half 1 in chunks handed out as tasks free up.
    if (i == 0) then
      rc = tt_for_ranges(ex, n / 2, 1024_c_size_t, c_funloc(scale_range), c_loc(offsets(i)))
    else
      rc = tt_for_ranges_dynamic(ex, n / 2, 1000_c_size_t, c_funloc(scale_range), c_loc(offsets(i)))
    end if
    if (rc /= TT_OK) then
      print '(a,i0,2a)', 'half_job ', i, ': tt_for_ranges: ', tt_strerror(rc)
      error stop 2
    end if
  end subroutine half_job

  !> A section: each rank sums its stripe of x, barrier, rank 0 adds the
  !> partial sums, barrier, every rank reads the total.
  recursive subroutine sum_section(arg, s) bind(c)
    type(c_ptr), value :: arg, s
    integer(c_int) :: r, p
    integer(c_size_t) :: i, lo, hi, chunk
    real(c_double) :: acc
    r = tt_section_rank(s)
    p = tt_section_size(s)
    if (r == 0) section_size = p
    chunk = (n + p - 1) / p
    lo = r * chunk + 1
    hi = min(n, (r + 1) * chunk)
    acc = 0.0_c_double
    do i = lo, hi
      acc = acc + x(i)
    end do
    partial(r) = acc
    if (tt_section_barrier(s) /= TT_OK) return
    if (r == 0) then
      total = sum(partial(0:p - 1))
    end if
    if (tt_section_barrier(s) /= TT_OK) return
    seen(r) = total
  end subroutine sum_section

  !> The team scope's callback: one section on all participants.
  recursive subroutine scope_body(arg, scope) bind(c)
    type(c_ptr), value :: arg, scope
    integer(c_int) :: rc
    scope_size = tt_scope_size(scope)
    rc = tt_scope_run(scope, c_funloc(sum_section), c_null_ptr)
    if (rc /= TT_OK) then
      print '(2a)', 'tt_scope_run: ', tt_strerror(rc)
      error stop 3
    end if
  end subroutine scope_body

  !> tt_external: an OpenMP region opened here gets `width` threads.
  recursive subroutine external_body(arg, width) bind(c)
    type(c_ptr), value :: arg
    integer(c_int), value :: width
    integer(c_int) :: team
    ext_width = width
    team = 1
    !$omp parallel shared(team)
    !$omp single
    !$ team = omp_get_num_threads()
    !$omp end single
    !$omp end parallel
    ext_team = team
  end subroutine external_body

end module example_kernels

program example
  use, intrinsic :: iso_c_binding
  use threadteam
  use example_kernels
  implicit none
  type(c_ptr) :: pool
  type(tt_exec), target :: ex, child
  type(c_ptr) :: p
  integer(c_int) :: rc, width, budget
  integer(c_size_t) :: i
  real(c_double) :: expect

  rc = tt_pool_create(pool, c_null_ptr)
  call check(rc, 'tt_pool_create')
  width = tt_pool_width(pool)
  if (width < 1) error stop 'tt_pool_width < 1'

  allocate (x(n), hits(n))
  do i = 1, n
    x(i) = real(i, c_double)
  end do
  hits = 0
  offsets = [0_c_size_t, n / 2]

  ! 1. A fork of two jobs, each running tt_for_ranges on its half.
  call check(tt_exec_init(ex, pool, width), 'tt_exec_init')
  budget = tt_exec_budget(ex)
  if (budget /= width) error stop 'tt_exec_budget /= width'
  p = tt_exec_reborrow(ex, child)
  call check(tt_fork(child, 2, c_funloc(half_job), c_null_ptr), 'tt_fork')
  do i = 1, n
    if (hits(i) /= 1 .or. x(i) /= 2.0_c_double * real(i, c_double)) then
      print '(a,i0,a,i0,a,g0)', 'fork: index ', i, ' visited ', hits(i), ' times, x = ', x(i)
      error stop 4
    end if
  end do
  ! The child was consumed: a second entry on it must say so.
  rc = tt_fork(child, 2, c_funloc(half_job), c_null_ptr)
  if (rc /= TT_ECONSUMED) then
    print '(2a)', 'second entry on a consumed child: ', tt_status_name(rc)
    error stop 5
  end if
  if (len(tt_strerror(TT_ECONSUMED)) == 0 .or. tt_status_name(TT_ECONSUMED) /= 'TT_ECONSUMED') &
    error stop 'tt_strerror / tt_status_name'

  ! 2. A team scope: partial sums, barriers, one total seen by every rank.
  p = tt_exec_reborrow(ex, child)
  call check(tt_team_scope(child, c_funloc(scope_body), c_null_ptr), 'tt_team_scope')
  expect = real(n, c_double) * real(n + 1, c_double)   ! sum of 2*i
  if (scope_size /= width .or. section_size /= width) then
    print '(a,i0,a,i0,a,i0)', 'scope size ', scope_size, ', section size ', section_size, &
      ', expected ', width
    error stop 6
  end if
  if (total /= expect .or. any(seen(0:width - 1) /= expect)) then
    print '(a,g0,a,g0)', 'team scope total ', total, ', expected ', expect
    error stop 7
  end if

  ! 3. tt_external: the callee's own OpenMP region gets `width` threads.
  p = tt_exec_reborrow(ex, child)
  call check(tt_external(child, c_funloc(external_body), c_null_ptr), 'tt_external')
  if (ext_width /= width) error stop 'tt_external: width /= budget'
  !$ if (ext_team /= width) then
  !$   print '(a,i0,a,i0)', 'tt_external: omp parallel formed ', ext_team, ' threads, width ', width
  !$   error stop 8
  !$ end if

  ! 4. A serial token runs inline.
  call tt_exec_init_serial(child)
  if (.not. tt_exec_is_serial(child) .or. tt_exec_budget(child) /= 1) error stop 'serial token'
  call tt_exec_finish(child)

  call tt_exec_finish(ex)
  call check(tt_pool_destroy(pool), 'tt_pool_destroy')
  print '(a,i0,a)', 'fortran example: pool width ', width, &
    ': fork + for_ranges, team scope with barriers, tt_external: ok'

contains

  subroutine check(rc, what)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    if (rc /= TT_OK) then
      print '(4a)', what, ': ', tt_status_name(rc), ' (' // tt_strerror(rc) // ')'
      error stop 1
    end if
  end subroutine check

end program example

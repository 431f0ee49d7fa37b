! threadteam.f90 -- Fortran interfaces (ISO_C_BINDING) to threadteam.h.
!
! `use threadteam` gives the token type, the error codes and interfaces to
! the C functions of the core API, with the C names and argument order.
! threadteam.h is the reference manual: every contract stated there holds
! here. Conventions of the binding:
!
!  - Pools, attributes, scopes and sections are `type(c_ptr)` handles.
!  - The token is `type(tt_exec)`, an opaque derived type of exactly the
!    size and alignment of the C struct (checked when the module is built,
!    fortran/abi_check.c). Declare tokens as local variables with the
!    TARGET attribute and never assign one to another: a copy is detected
!    (TT_ECOPY), as in C.
!  - Callbacks are `bind(c)` procedures whose arguments are all VALUE:
!    `type(c_ptr)` for the user argument, child tokens, scopes and
!    sections, `integer(c_int)` for unsigned indices and widths,
!    `integer(c_size_t)` for range bounds. Pass them with c_funloc(proc)
!    and their data with c_loc(var). Mark them RECURSIVE: they run on
!    several threads at once.
!  - Range bounds are C's: [begin, end) counted from 0, so a Fortran loop
!    over a 1-based array is `do i = begin + 1, end`.
!  - A child token arrives in a job as a `type(c_ptr)`;
!    tt_exec_from_ptr(child) gives a `type(tt_exec), pointer` to it.
!  - unsigned int is `integer(c_int)`; bool is `logical(c_bool)`.
module threadteam
  use, intrinsic :: iso_c_binding
  implicit none
  private :: c_tt_strerror, c_tt_status_name, c_string

  !> Words of 8 bytes in the C struct tt_exec (uint64_t tt__private[12]).
  integer, parameter :: tt_exec_words = 12

  !> The token (threadteam.h: tt_exec). Opaque: its fields are private.
  type, bind(c) :: tt_exec
    integer(c_int64_t), private :: tt_private(tt_exec_words) = 0_c_int64_t
  end type tt_exec

  ! Return codes (threadteam.h: enum tt_status).
  integer(c_int), parameter :: TT_OK = 0
  integer(c_int), parameter :: TT_EINVAL = 1
  integer(c_int), parameter :: TT_ENOMEM = 2
  integer(c_int), parameter :: TT_EAGAIN = 3
  integer(c_int), parameter :: TT_ESHORTTEAM = 4
  integer(c_int), parameter :: TT_ERANGE = 5
  integer(c_int), parameter :: TT_ECONSUMED = 6
  integer(c_int), parameter :: TT_ECOPY = 7
  integer(c_int), parameter :: TT_EBUSY = 8
  integer(c_int), parameter :: TT_EFORKED = 9
  integer(c_int), parameter :: TT_ENOTSUP = 10
  integer(c_int), parameter :: TT_EWRONGTHREAD = 11
  integer(c_int), parameter :: TT_EDESTROYED = 12
  integer(c_int), parameter :: TT_REFUSED_FORK_CHILD = 32
  integer(c_int), parameter :: TT_REFUSED_CALLER_IN_POOL = 33
  integer(c_int), parameter :: TT_REFUSED_UNAVAILABLE = 34
  integer(c_int), parameter :: TT_REFUSED_BUSY = 35

  ! The shapes of the callbacks (for documentation and for procedure
  ! pointers); the entries take them as type(c_funptr) from c_funloc.
  abstract interface
    !> tt_fork's job: job i, with a child token holding its share.
    subroutine tt_job_fn(arg, i, child) bind(c)
      import :: c_ptr, c_int
      type(c_ptr), value :: arg
      integer(c_int), value :: i
      type(c_ptr), value :: child
    end subroutine tt_job_fn
    !> tt_for_ranges' body: the C range [begin, end).
    subroutine tt_range_fn(arg, begin, end) bind(c)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: arg
      integer(c_size_t), value :: begin, end
    end subroutine tt_range_fn
    !> tt_external's callback: `width` threads for outside OpenMP code.
    subroutine tt_external_fn(arg, width) bind(c)
      import :: c_ptr, c_int
      type(c_ptr), value :: arg
      integer(c_int), value :: width
    end subroutine tt_external_fn
    !> A team scope's callback, on the calling thread (participant 0).
    subroutine tt_scope_fn(arg, scope) bind(c)
      import :: c_ptr
      type(c_ptr), value :: arg, scope
    end subroutine tt_scope_fn
    !> A section, run by every participant at once.
    subroutine tt_section_fn(arg, section) bind(c)
      import :: c_ptr
      type(c_ptr), value :: arg, section
    end subroutine tt_section_fn
  end interface

  interface
    ! ---------------------------------------------------------------- errors
    function c_tt_strerror(code) bind(c, name='tt_strerror') result(s)
      import :: c_int, c_ptr
      integer(c_int), value :: code
      type(c_ptr) :: s
    end function c_tt_strerror
    function c_tt_status_name(code) bind(c, name='tt_status_name') result(s)
      import :: c_int, c_ptr
      integer(c_int), value :: code
      type(c_ptr) :: s
    end function c_tt_status_name

    ! ------------------------------------------------------ pool attributes
    function tt_pool_attr_create(attr) bind(c, name='tt_pool_attr_create') result(rc)
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: attr
      integer(c_int) :: rc
    end function tt_pool_attr_create
    subroutine tt_pool_attr_destroy(attr) bind(c, name='tt_pool_attr_destroy')
      import :: c_ptr
      type(c_ptr), value :: attr
    end subroutine tt_pool_attr_destroy
    function tt_pool_attr_set_threads(attr, threads) bind(c, name='tt_pool_attr_set_threads') result(rc)
      import :: c_int, c_ptr
      type(c_ptr), value :: attr
      integer(c_int), value :: threads
      integer(c_int) :: rc
    end function tt_pool_attr_set_threads
    function tt_pool_attr_get_threads(attr, threads) bind(c, name='tt_pool_attr_get_threads') result(rc)
      import :: c_int, c_ptr
      type(c_ptr), value :: attr
      integer(c_int), intent(out) :: threads
      integer(c_int) :: rc
    end function tt_pool_attr_get_threads
    function tt_pool_attr_set_acquire_timeout(attr, ns) bind(c, name='tt_pool_attr_set_acquire_timeout') result(rc)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: attr
      integer(c_int64_t), value :: ns
      integer(c_int) :: rc
    end function tt_pool_attr_set_acquire_timeout

    ! ---------------------------------------------------------------- pools
    function tt_pool_create(pool, attr) bind(c, name='tt_pool_create') result(rc)
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: pool
      type(c_ptr), value :: attr          ! c_null_ptr: the defaults
      integer(c_int) :: rc
    end function tt_pool_create
    function tt_pool_destroy(pool) bind(c, name='tt_pool_destroy') result(rc)
      import :: c_int, c_ptr
      type(c_ptr), value :: pool
      integer(c_int) :: rc
    end function tt_pool_destroy
    function tt_pool_width(pool) bind(c, name='tt_pool_width') result(w)
      import :: c_int, c_ptr
      type(c_ptr), value :: pool
      integer(c_int) :: w
    end function tt_pool_width

    ! --------------------------------------------------------------- tokens
    function tt_exec_init(ex, pool, budget) bind(c, name='tt_exec_init') result(rc)
      import :: c_int, c_ptr, tt_exec
      type(tt_exec), intent(inout) :: ex
      type(c_ptr), value :: pool
      integer(c_int), value :: budget
      integer(c_int) :: rc
    end function tt_exec_init
    subroutine tt_exec_init_serial(ex) bind(c, name='tt_exec_init_serial')
      import :: tt_exec
      type(tt_exec), intent(inout) :: ex
    end subroutine tt_exec_init_serial
    function tt_exec_budget(ex) bind(c, name='tt_exec_budget') result(b)
      import :: c_int, tt_exec
      type(tt_exec), intent(in) :: ex
      integer(c_int) :: b
    end function tt_exec_budget
    function tt_exec_is_serial(ex) bind(c, name='tt_exec_is_serial') result(s)
      import :: c_bool, tt_exec
      type(tt_exec), intent(in) :: ex
      logical(c_bool) :: s
    end function tt_exec_is_serial
    !> Mints `child` (returns c_loc(child)).
    function tt_exec_reborrow(parent, child) bind(c, name='tt_exec_reborrow') result(p)
      import :: c_ptr, tt_exec
      type(tt_exec), intent(inout) :: parent, child
      type(c_ptr) :: p
    end function tt_exec_reborrow
    !> Narrows `ex` in place (returns c_loc(ex)).
    function tt_exec_limit(ex, max) bind(c, name='tt_exec_limit') result(p)
      import :: c_int, c_ptr, tt_exec
      type(tt_exec), intent(inout) :: ex
      integer(c_int), value :: max
      type(c_ptr) :: p
    end function tt_exec_limit
    subroutine tt_exec_finish(ex) bind(c, name='tt_exec_finish')
      import :: tt_exec
      type(tt_exec), intent(inout) :: ex
    end subroutine tt_exec_finish

    ! -------------------------------------------------------------- entries
    !> job: c_funloc of a tt_job_fn.
    function tt_fork(ex, jobs, job, arg) bind(c, name='tt_fork') result(rc)
      import :: c_int, c_ptr, c_funptr, tt_exec
      type(tt_exec), intent(inout) :: ex
      integer(c_int), value :: jobs
      type(c_funptr), value :: job
      type(c_ptr), value :: arg
      integer(c_int) :: rc
    end function tt_fork
    !> body: c_funloc of a tt_range_fn.
    function tt_for_ranges(ex, len, grain, body, arg) bind(c, name='tt_for_ranges') result(rc)
      import :: c_int, c_ptr, c_funptr, c_size_t, tt_exec
      type(tt_exec), intent(inout) :: ex
      integer(c_size_t), value :: len, grain
      type(c_funptr), value :: body
      type(c_ptr), value :: arg
      integer(c_int) :: rc
    end function tt_for_ranges
    !> Chunks of grain indices handed out first come, first served (as
    !> schedule(dynamic, grain)); body: c_funloc of a tt_range_fn.
    function tt_for_ranges_dynamic(ex, len, grain, body, arg) bind(c, name='tt_for_ranges_dynamic') result(rc)
      import :: c_int, c_ptr, c_funptr, c_size_t, tt_exec
      type(tt_exec), intent(inout) :: ex
      integer(c_size_t), value :: len, grain
      type(c_funptr), value :: body
      type(c_ptr), value :: arg
      integer(c_int) :: rc
    end function tt_for_ranges_dynamic
    !> fn: c_funloc of a tt_external_fn.
    function tt_external(ex, fn, arg) bind(c, name='tt_external') result(rc)
      import :: c_int, c_ptr, c_funptr, tt_exec
      type(tt_exec), intent(inout) :: ex
      type(c_funptr), value :: fn
      type(c_ptr), value :: arg
      integer(c_int) :: rc
    end function tt_external

    ! ---------------------------------------------------------- team scopes
    !> fn: c_funloc of a tt_scope_fn.
    function tt_team_scope(ex, fn, arg) bind(c, name='tt_team_scope') result(rc)
      import :: c_int, c_ptr, c_funptr, tt_exec
      type(tt_exec), intent(inout) :: ex
      type(c_funptr), value :: fn
      type(c_ptr), value :: arg
      integer(c_int) :: rc
    end function tt_team_scope
    function tt_scope_size(scope) bind(c, name='tt_scope_size') result(n)
      import :: c_int, c_ptr
      type(c_ptr), value :: scope
      integer(c_int) :: n
    end function tt_scope_size
    !> section: c_funloc of a tt_section_fn.
    function tt_scope_run(scope, section, arg) bind(c, name='tt_scope_run') result(rc)
      import :: c_int, c_ptr, c_funptr
      type(c_ptr), value :: scope
      type(c_funptr), value :: section
      type(c_ptr), value :: arg
      integer(c_int) :: rc
    end function tt_scope_run
    function tt_scope_run_with(scope, width, section, arg) bind(c, name='tt_scope_run_with') result(rc)
      import :: c_int, c_ptr, c_funptr
      type(c_ptr), value :: scope
      integer(c_int), value :: width
      type(c_funptr), value :: section
      type(c_ptr), value :: arg
      integer(c_int) :: rc
    end function tt_scope_run_with
    function tt_section_rank(section) bind(c, name='tt_section_rank') result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: section
      integer(c_int) :: r
    end function tt_section_rank
    function tt_section_size(section) bind(c, name='tt_section_size') result(n)
      import :: c_int, c_ptr
      type(c_ptr), value :: section
      integer(c_int) :: n
    end function tt_section_size
    !> TT_OK once every participant arrived, or the scope's failure code
    !> (the barrier then waits for nobody: leave the section).
    function tt_section_barrier(section) bind(c, name='tt_section_barrier') result(rc)
      import :: c_int, c_ptr
      type(c_ptr), value :: section
      integer(c_int) :: rc
    end function tt_section_barrier
    !> Fail the scope from a section (the first code wins).
    function tt_section_fail(section, code) bind(c, name='tt_section_fail') result(rc)
      import :: c_int, c_ptr
      type(c_ptr), value :: section
      integer(c_int), value :: code
      integer(c_int) :: rc
    end function tt_section_fail
    !> End the fork that handed `child` to this job with `code` (a tt_fork
    !> job's `child` pointer, as the job received it).
    function tt_fork_fail(child, code) bind(c, name='tt_fork_fail') result(rc)
      import :: c_int, c_ptr
      type(c_ptr), value :: child
      integer(c_int), value :: code
      integer(c_int) :: rc
    end function tt_fork_fail
  end interface

contains

  !> A sentence describing `code` (threadteam.h: tt_strerror).
  function tt_strerror(code) result(msg)
    integer(c_int), intent(in) :: code
    character(len=:), allocatable :: msg
    msg = c_string(c_tt_strerror(code))
  end function tt_strerror

  !> The symbolic name of `code`, such as "TT_ECONSUMED".
  function tt_status_name(code) result(msg)
    integer(c_int), intent(in) :: code
    character(len=:), allocatable :: msg
    msg = c_string(c_tt_status_name(code))
  end function tt_status_name

  !> The token behind a child-token pointer (a tt_fork job's `child`).
  function tt_exec_from_ptr(p) result(ex)
    type(c_ptr), intent(in) :: p
    type(tt_exec), pointer :: ex
    call c_f_pointer(p, ex)
  end function tt_exec_from_ptr

  !> A Fortran copy of the NUL-terminated C string at p ("" for NULL).
  function c_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: n, i
    interface
      function strlen(str) bind(c, name='strlen') result(len)
        import :: c_ptr, c_size_t
        type(c_ptr), value :: str
        integer(c_size_t) :: len
      end function strlen
    end interface
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = int(strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function c_string

end module threadteam

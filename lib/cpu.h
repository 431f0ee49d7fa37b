/*
 * cpu.h -- the process's CPUs and thread limits, room for more threads,
 * pinning (cpu.c): below every layer that asks. It takes the backend
 * table (backend.h) as an argument or through its getter, for OpenMP's places
 * and thread limit.
 */
#ifndef TT_CPU_H
#define TT_CPU_H

#include "backend.h"

/* The process's CPU set (the union of OpenMP's places when there are any,
 * since libgomp may have bound the initial thread to one place before
 * main; otherwise the calling thread's affinity set). False when unknown. */
bool tt__process_cpus(cpu_set_t *set);
/* CPUs in the calling thread's affinity set (at least 1). */
unsigned tt__affinity_cpus(void);
/* The CPUs of the process's affinity set when first asked: a hint for hot
 * paths that must not make a system call. */
unsigned tt__cpu_count_cached(void);
/* The widest pool the system allows: our own cap, OpenMP's thread limit
 * (through `be`), the kernel's threads-max and RLIMIT_NPROC. */
unsigned tt__width_limit(const tt__backend *be);
/* Threads of the process now, from /proc (0 when unknown). */
unsigned tt__process_threads(void);
/* tt__threads_room: TT_OK when `need` more threads fit under threads-max,
 * the pids cgroup and RLIMIT_NPROC now, else TT_EAGAIN. tt__region_room:
 * the same for a root region of `width` on the calling thread, once per
 * thread and width. */
int tt__threads_room(unsigned need);
int tt__region_room(unsigned width);

/* Whether the library may change a thread's affinity: not under likwid-pin
 * (LIKWID_PIN set), which pins the threads itself. */
bool tt__pin_allowed(void);
/* Pin the calling thread (a scope's participant) to `cpu`, its mask before
 * in *saved; false, nothing done, where it cannot or tt__pin_allowed says
 * no. tt__cpu_unpin puts *saved back. While pinned, the thread's own mask
 * is known: tt__cpu_callee_unpin puts it back for a tt_external's callee
 * (true when it did: *pinned is the pin, *own the record) and
 * tt__cpu_callee_repin pins the thread again after. */
bool tt__cpu_pin(unsigned cpu, cpu_set_t *saved);
void tt__cpu_unpin(const cpu_set_t *saved);
bool tt__cpu_callee_unpin(cpu_set_t *pinned, const cpu_set_t **own);
void tt__cpu_callee_repin(const cpu_set_t *pinned, const cpu_set_t *own);
/* Move the calling thread off `cpu` and leave its affinity mask as it was:
 * take `cpu` out of the mask and put the mask back, the kernel migrating
 * the thread in between. False, nothing done, where the mask has no other
 * CPU, `cpu` is not in it, or tt__pin_allowed says no (team_scope.c,
 * "Sharing a CPU", says why and when). */
bool tt__cpu_move_off(int cpu);
/* At most one move per `every_ns` per `*next_ns` (a block's):
 * true for the caller whose compare-exchange moves the time on (relaxed:
 * a hint that elects a mover and publishes nothing). */
bool tt__cpu_move_due(_Atomic uint64_t *next_ns, uint64_t every_ns);
/* At most one move a millisecond per scope block. */
#ifndef TT__MOVE_EVERY_NS
#define TT__MOVE_EVERY_NS 1000000ull
#endif

#endif /* TT_CPU_H */

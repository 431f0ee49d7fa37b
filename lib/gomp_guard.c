/*
 * gomp_guard.c -- libgomp's thread starts and allocations, retried.
 *
 * libgomp ends the process (gomp_fatal -> exit(1)) when pthread_create
 * fails while it forms a team ("Thread creation failed") or when one of its
 * allocations fails ("Out of memory allocating N bytes"). Nothing it does
 * hands such a failure back to its caller, so a library call that opens a
 * region cannot turn one into a code afterwards. Two guards make that exit
 * unreachable from the library's own calls in the cases that can be seen:
 *
 *  - before the library asks libgomp for threads it may not have yet,
 *    tt__threads_room (cpu.c) counts the threads that exist against the
 *    kernel's limits and refuses with TT_EAGAIN, nothing consumed;
 *  - the failures that no count foresees (a transient EAGAIN: another
 *    process's threads came and went, a stack mmap that the kernel refused
 *    once, an allocation that failed once) are retried here, a bounded
 *    number of times with a growing pause (oneTBB retries its thread starts
 *    about 20 times), before libgomp sees them.
 *
 * The retry needs libgomp's calls to come here. libgomp reaches
 * pthread_create, malloc, calloc, realloc and memalign through its own
 * relocation slots (its GOT); at load, the library rewrites those slots in
 * libgomp alone to point at the wrappers below, which call what the slots
 * would have resolved to (dlsym(RTLD_DEFAULT): a preloaded interposer
 * first, then libc). No other module's calls change, and no symbol of the
 * process is interposed. Where libgomp is linked statically, or the slots
 * cannot be found, nothing is rewritten and only the counts guard.
 *
 * What still ends the process: a failure that lasts through every retry and
 * that the counts did not foresee (a pid cgroup or a user namespace whose
 * count /proc does not show, memory exhausted for good), and any failure
 * inside the application's own regions that outlasts the retries (the
 * header, "Resource failures", says so).
 */
#include "base.h"
#include "cpu.h"
#include "test_hooks.h"

#if TT_HAVE_OPENMP && (defined(__x86_64__) || defined(__aarch64__))

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Tries in all, the first one included: 20, with pauses of 1 us doubling up
 * to 2 ms (about 12 ms in all before libgomp gets the failure). */
#define GUARD_TRIES 20

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static create_fn real_create;
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_memalign)(size_t, size_t);

static _Atomic unsigned long retried;

static void pause_before(unsigned i)
{
    atomic_fetch_add_explicit(&retried, 1, memory_order_relaxed);
    long ns = 1000L << (i < 11 ? i : 11);
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static int guard_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    int rc = real_create(t, a, fn, arg);
    for (unsigned i = 1; rc == EAGAIN && i < GUARD_TRIES; i++) {
        pause_before(i);
        rc = real_create(t, a, fn, arg);
    }
    return rc;
}

static void *guard_malloc(size_t n)
{
    void *p = real_malloc(n);
    for (unsigned i = 1; !p && i < GUARD_TRIES; i++) {
        pause_before(i);
        p = real_malloc(n);
    }
    return p;
}

static void *guard_calloc(size_t n, size_t s)
{
    void *p = real_calloc(n, s);
    for (unsigned i = 1; !p && i < GUARD_TRIES; i++) {
        pause_before(i);
        p = real_calloc(n, s);
    }
    return p;
}

static void *guard_realloc(void *old, size_t n)
{
    void *p = real_realloc(old, n);
    for (unsigned i = 1; !p && n && i < GUARD_TRIES; i++) {
        pause_before(i);
        p = real_realloc(old, n);
    }
    return p;
}

static void *guard_memalign(size_t al, size_t n)
{
    void *p = real_memalign(al, n);
    for (unsigned i = 1; !p && i < GUARD_TRIES; i++) {
        pause_before(i);
        p = real_memalign(al, n);
    }
    return p;
}

/* The library's own thread starts retry the same way. */
int tt__thread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(t, a, fn, arg);
    for (unsigned i = 1; rc == EAGAIN && i < GUARD_TRIES; i++) {
        pause_before(i);
        rc = pthread_create(t, a, fn, arg);
    }
    return rc;
}

unsigned long tt__guard_retries(void)
{
    return atomic_load_explicit(&retried, memory_order_relaxed);
}

static unsigned slots_patched;

static void *wrapper_for(const char *name)
{
    if (!strcmp(name, "pthread_create"))
        return real_create ? (void *)guard_create : NULL;
    if (!strcmp(name, "malloc"))
        return real_malloc ? (void *)guard_malloc : NULL;
    if (!strcmp(name, "calloc"))
        return real_calloc ? (void *)guard_calloc : NULL;
    if (!strcmp(name, "realloc"))
        return real_realloc ? (void *)guard_realloc : NULL;
    if (!strcmp(name, "memalign"))
        return real_memalign ? (void *)guard_memalign : NULL;
    return NULL;
}

static void patch_slot(void **slot, void *to, const struct dl_phdr_info *info)
{
    /* A slot in the RELRO segment is read-only once relocated. */
    uintptr_t a = (uintptr_t)slot;
    bool relro = false;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_GNU_RELRO && a >= lo && a < lo + ph->p_memsz)
            relro = true;
    }
    long pg = sysconf(_SC_PAGESIZE);
    void *page = (void *)(a & ~(uintptr_t)(pg - 1));
    if (relro && mprotect(page, (size_t)pg, PROT_READ | PROT_WRITE) != 0)
        return;
    __atomic_store_n(slot, to, __ATOMIC_RELEASE);
    if (relro)
        mprotect(page, (size_t)pg, PROT_READ);
    slots_patched++;
}

static void patch_relocs(const ElfW(Rela) *r, size_t bytes, const ElfW(Sym) *sym, const char *str,
                         const struct dl_phdr_info *info)
{
    for (size_t i = 0; i < bytes / sizeof *r; i++) {
        unsigned long type = ELF64_R_TYPE(r[i].r_info);
#if defined(__x86_64__)
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
            continue;
#else
        if (type != R_AARCH64_JUMP_SLOT && type != R_AARCH64_GLOB_DAT)
            continue;
#endif
        const char *name = str + sym[ELF64_R_SYM(r[i].r_info)].st_name;
        void *to = wrapper_for(name);
        if (to)
            patch_slot((void **)(info->dlpi_addr + r[i].r_offset), to, info);
    }
}

static int patch_gomp(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    base = base ? base + 1 : info->dlpi_name;
    if (!base || strncmp(base, "libgomp.so", 10) != 0)
        return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (unsigned i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 1;
    uintptr_t symtab = 0, strtab = 0, jmprel = 0, rela = 0;
    size_t pltsz = 0, relasz = 0;
    bool rela_plt = true;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = dyn->d_un.d_ptr; break;
        case DT_STRTAB: strtab = dyn->d_un.d_ptr; break;
        case DT_JMPREL: jmprel = dyn->d_un.d_ptr; break;
        case DT_PLTRELSZ: pltsz = dyn->d_un.d_val; break;
        case DT_RELA: rela = dyn->d_un.d_ptr; break;
        case DT_RELASZ: relasz = dyn->d_un.d_val; break;
        case DT_PLTREL: rela_plt = dyn->d_un.d_val == DT_RELA; break;
        default: break;
        }
    }
    if (!symtab || !strtab || !rela_plt)
        return 1;
    /* glibc relocates these addresses in place on most targets; where it
     * does not, they are still offsets from the load address. */
#define TT__ABS(x) ((x) && (x) < info->dlpi_addr ? (x) + info->dlpi_addr : (x))
    const ElfW(Sym) *sym = (const ElfW(Sym) *)TT__ABS(symtab);
    const char *str = (const char *)TT__ABS(strtab);
    if (jmprel)
        patch_relocs((const ElfW(Rela) *)TT__ABS(jmprel), pltsz, sym, str, info);
    if (rela)
        patch_relocs((const ElfW(Rela) *)TT__ABS(rela), relasz, sym, str, info);
#undef TT__ABS
    return 1;
}

static void guard_install(void)
{
    /* glibc loads libgcc_s (its unwinder) the first time a thread calls
     * pthread_exit, and aborts the process ("libgcc_s.so.1 must be
     * installed for pthread_exit to work") when that load fails, as it does
     * when an allocation fails there. libgomp's workers end with
     * pthread_exit when a team is torn down (a dedicated pool's destroy).
     * backtrace() makes glibc load the same unwinder now, once, where a
     * failure costs nothing (it then loads it later, as before). */
    void *frame[1];
    (void)backtrace(frame, 1);
    if (getenv("TT_NO_GOMP_GUARD"))
        return;
    real_create = (create_fn)dlsym(RTLD_DEFAULT, "pthread_create");
    real_malloc = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_DEFAULT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "realloc");
    real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_DEFAULT, "memalign");
    dl_iterate_phdr(patch_gomp, NULL);
}

static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/* At load, before the application's threads exist where possible (a slot
 * rewritten while libgomp's lazy binder resolves it could be overwritten
 * with the plain target: harmless, the retry is then lost for it). */
__attribute__((constructor)) static void guard_at_load(void) { pthread_once(&guard_once, guard_install); }

unsigned tt__guard_slots(void)
{
    pthread_once(&guard_once, guard_install);
    return slots_patched;
}

#else /* no OpenMP, or a target whose relocations are not handled here */

#include <errno.h>

int tt__thread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(t, a, fn, arg);
    for (unsigned i = 1; rc == EAGAIN && i < 20; i++) {
        struct timespec ts = {0, 1000L << (i < 11 ? i : 11)};
        nanosleep(&ts, NULL);
        rc = pthread_create(t, a, fn, arg);
    }
    return rc;
}

unsigned long tt__guard_retries(void) { return 0; }
unsigned tt__guard_slots(void) { return 0; }

#endif

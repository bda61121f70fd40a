/* Counts the heap allocations of a process (LD_PRELOAD), for tests/model/test_allocations.py:
   every malloc family call, which is also what operator new ends in. ds4_test_allocations()
   reads the count (ctypes). */
#include <stddef.h>
extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
static unsigned long n_alloc;
unsigned long ds4_test_allocations(void) { return __atomic_load_n(&n_alloc, __ATOMIC_RELAXED); }
static void count(void) { __atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED); }
void* malloc(size_t n) { count(); return __libc_malloc(n); }
void* calloc(size_t a, size_t b) { count(); return __libc_calloc(a, b); }
void* realloc(void* p, size_t n) { count(); return __libc_realloc(p, n); }
void* aligned_alloc(size_t a, size_t n) { count(); return __libc_memalign(a, n); }
void* memalign(size_t a, size_t n) { count(); return __libc_memalign(a, n); }
int posix_memalign(void** p, size_t a, size_t n) { count(); *p = __libc_memalign(a, n); return *p ? 0 : 12; }

/* cmc_internal.h: what the parts of the C helper share with each other and not with
 * Python (cmc_helper.h is the module's API): the trap page's layout, with the values
 * cmc's Python also knows from the generated cmc_abi.h; what a fork keeps of a thread;
 * the calls made in a node's stopped threads (inject.c) and the steps of a copy
 * (fork.c) that other parts use. Hidden: nothing here leaves the module. Included
 * after the system headers.
 */
#ifndef CMC_INTERNAL_H
#define CMC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "cmc_helper.h"
#include "cmc_abi.h"

/* A value of cmc_abi.h as text, for the asm */
#define CMC_STR_(x) #x
#define CMC_STR(x) CMC_STR_(x)

/* ---- the trap page (trap.c fills it at every exec; docs/design.md, "The TSC is
 * cmc's"), at CMC_TRAP_PAGE, CMC_TRAP_PAGE_SIZE bytes */

/* A `syscall` the filter lets through without a notification (then `hlt`): the calls
 * cmc injects into a stopped thread are made there (cmc/kernel/linux/abi.py:
 * TRAP_UNTRACED_AT; docs/design.md, "Calls cmc makes in a node's threads") */
#define UNTRACED_IP (CMC_TRAP_PAGE + CMC_TRAP_UNTRACED_AT)
/* The second (`syscall; ret`) is at CMC_TRAP_BIRTH_AT (abi.py: TRAP_BIRTH_AT), and the
 * code that makes a copy's threads (fork.c's birth code) here */
#define TRAP_BIRTH_CODE_AT 0xe00
/* Below the trap page's next page, at CMC_TRAP_SCRATCH, CMC_TRAP_SCRATCH_SIZE bytes:
 * memory of the process's own for that code's table and each new thread's words
 * (abi.py: TRAP_SCRATCH) */

/* ---- what a fork keeps of a thread */

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
struct rseq_config { uint64_t ptr; uint32_t size, sig, flags, pad; };

struct stack_rec { uint64_t sp; int32_t flags, pad; uint64_t size; };   /* stack_t */

/* What the kernel keeps per thread that a fork does not carry to a new thread. */
struct thread_state {
    struct user_regs_struct again;   /* about to make its held call again */
    uint64_t mask;                   /* blocked signals */
    uint64_t robust, robust_len;     /* set_robust_list */
    struct rseq_config rseq;
    struct stack_rec ss;
    int valid;                       /* read: to be set back if the fork fails */
    struct user_fpregs_struct fp;    /* x87 and SSE state (fxsave's) */
};

#pragma GCC visibility push(hidden)

/* ---- inject.c: calls in a node's stopped threads */

int wait_traced(int pid, int *st, int timeout_ms);
int inject(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
           uint64_t a0, uint64_t a1, uint64_t a2, long *result);
int inject6(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
            const uint64_t a[6], long *result);
int inject_born(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
                const uint64_t a[6], long *result, int *born);
int batch_call(int m, const int *tids, const struct user_regs_struct *const *bases,
               long nr, uint64_t (*args)[6], int arg, unsigned char *bufs, size_t len,
               long *res);
int inject_with(int tid, const struct user_regs_struct *base, long nr, uint64_t a[6],
                int arg, void *buf, size_t len, long *result);

/* What batch_call takes for up to n threads: their ids, registers, arguments, a
 * stack_t each (sigaltstack's), results. */
struct batch {
    int *ids;
    const struct user_regs_struct **bases;
    uint64_t (*args)[6];
    struct stack_rec *ss;
    long *res;
};
void batch_free(struct batch *b);
int batch_alloc(struct batch *b, int n);

/* ---- fork.c: copies of a process's threads, used by tree.c; its birth code, put in
 * the trap page by trap.c */

int stop_threads(int listener, int n, const int *tids, const uint64_t *held,
                 struct thread_state *ts, const char *first, const char *known);
int remap(int tid, const struct user_regs_struct *b, int nmaps,
          const struct cmc_remap *maps);
int make_threads(int child, struct thread_state *ts, const uint64_t *ctids,
                 int k, int *made, int born, int *traced);
void end_fork(int child, const int *made, int nmade, const int *tids,
              const struct thread_state *ts, int seized, const char *known);
extern const unsigned char cmc_birth_code[], cmc_birth_child[], cmc_birth_trap[],
    cmc_birth_code_end[];

#pragma GCC visibility pop

#endif

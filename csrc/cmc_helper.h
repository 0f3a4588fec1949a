/* cmc_helper.h: the C side of cmc's kernel layer, and the cffi cdef.
 *
 * Plain C, no policy, no Python.h. Every function returns >= 0 on success
 * or -errno. The seccomp filter itself is built by Python (cmc/kernel/linux/filter.py)
 * and handed over as an array of classic BPF instructions.
 * This file is read verbatim by cffi as its cdef: keep it to declarations that
 * cffi can parse (no macros, no includes).
 */

struct cmc_bpf_insn {          /* same layout as struct sock_filter */
    uint16_t code;
    uint8_t jt;
    uint8_t jf;
    uint32_t k;
};

struct cmc_notif {             /* the parts of struct seccomp_notif cmc uses */
    uint64_t id;
    uint32_t pid;
    int32_t nr;
    uint32_t arch;
    uint64_t ip;
    uint64_t args[6];
};

/* Fork a node process with the filter installed between fork and exec.
 * The child gets fds 0, 1, 2, 3 and 193 from fds[0..4], every other fd closed,
 * RLIMIT_NOFILE = nofile, its working directory cwd, a new process group,
 * PR_SET_PDEATHSIG(SIGKILL), no ASLR, no_new_privs, and the filter (with
 * SECCOMP_FILTER_FLAG_NEW_LISTENER, plus WAIT_KILLABLE_RECV when the kernel
 * has it). The listener reaches the parent over a socketpair; *listener_out
 * gets it. The child's execve is itself notified: the caller must answer it
 * (cmc_exec_continue). With own_pids, the child is the first process (1) of a PID
 * namespace of its own (needs CAP_SYS_ADMIN). Returns the pid, or -errno (the
 * child's errno when the filter could not be installed). */
/* Whether launches get an IPC namespace of their own: -1 not known yet (no launch),
 * 0 no (no CAP_SYS_ADMIN), 1 yes. */
int cmc_private_ipc(void);

int cmc_spawn(const char *path, char *const argv[], char *const envp[],
              const char *cwd, const int fds[5],
              const struct cmc_bpf_insn *filter, unsigned int filter_len,
              unsigned int nofile, int own_pids, int *listener_out);

/* Receive one notification (blocking; retried on EINTR). 0 or -errno. */
int cmc_recv(int listener, struct cmc_notif *out);

/* Receive one notification as cmc_recv does; but when its call is nrs[i], its flags
 * have none of the bits of flag_mask, and the path in its argument path_args[i]
 * contains none of the needles (needle: strings one after the other, each ended by
 * NUL, the list by an empty one), answer it at once with CONTINUE (it runs natively)
 * and return 1. The flags are argument flag_args[i], or, when flag_args[i] is -k,
 * the 64-bit value argument k-1 points to (openat2's struct open_how). 0 when *out
 * is for the caller, or -errno.
 * With alone not NULL, also some calls of thread alone[0], the one thread of its
 * node that runs (docs/design.md, "Calls of the one running thread answered in C"):
 * syscalls alone[5] and alone[6] with CONTINUE; and clock_gettime (syscall alone[1])
 * of a clock it names (realtime, monotonic or CPU time): alone[2], alone[3] or
 * alone[4] (nanoseconds) written as its timespec into the target, answered 0; the TSC
 * trap's read: the monotonic clock as 8 bytes. Then 1 is returned. */
int cmc_recv_passing(int listener, struct cmc_notif *out, const int32_t nrs[],
                     const int32_t path_args[], const int32_t flag_args[],
                     uint64_t flag_mask, int n, const char *needle,
                     const int64_t alone[7]);

/* Answer notification id: the call returns val, or fails with errno err when
 * err != 0, or (cont != 0) runs natively in the target. 0 or -errno
 * (-ENOENT: the target is gone or the call was withdrawn). */
int cmc_respond(int listener, uint64_t id, int64_t val, int32_t err, int cont);

/* Install fd srcfd into the target at number newfd (or any number when
 * newfd < 0) and, with send != 0, answer the notification with that number
 * atomically. Returns the number in the target or -errno. */
int cmc_addfd(int listener, uint64_t id, int srcfd, int newfd, int cloexec, int send);

/* Copy len bytes from/to the target's memory. Returns bytes copied or -errno.
 * Writes fall back to /proc/PID/mem, which can write read-only pages. */
int64_t cmc_read_mem(int pid, uint64_t addr, void *buf, uint64_t len);
int64_t cmc_write_mem(int pid, uint64_t addr, const void *buf, uint64_t len);
/* Write an answer into the target's memory as the kernel would copy it out: only
 * where the target may write (process_vm_writev); else -EFAULT. */
int64_t cmc_answer_mem(int pid, uint64_t addr, const void *buf, uint64_t len);

/* Answer a notified execve of pid (notification id) with CONTINUE while
 * tracing it, and at the exec stop: retag AT_SYSINFO_EHDR as AT_IGNORE (so
 * libc makes real, trappable clock calls instead of using the vDSO),
 * overwrite the 16 AT_RANDOM bytes with random16, and with trap != 0 make the
 * TSC cmc's (the trap page, its SIGSEGV handler, PR_TSC_SIGSEGV). Then detach.
 * Returns 0 when the exec happened, 1 when the exec failed and the target
 * went on running, 2 when the target exited (*status gets the wait status),
 * 3 when the exec happened but the trap could not be set (*status gets the
 * errno), or -errno (-ETIMEDOUT after timeout_ms). */
int cmc_exec_continue(int listener, uint64_t id, int pid,
                      const unsigned char random16[16], int trap, int timeout_ms,
                      int *status);

/* The address of the trap page every exec'd image gets (*addr_out) and the length
 * of its code. */
int cmc_trap_page(uint64_t *addr_out);

/* A copy, in this process, of descriptor fd of process pid (pidfd_getfd,
 * Linux 5.6), through `pidfd` when it is one of pid's (else -1); close-on-exec. Used
 * to ask the kernel about the readiness of a node's real descriptors. Returns the new
 * fd or -errno. */
int cmc_getfd(int pid, int fd, int pidfd);

/* From now on (dir: a node's directory; NULL or "": no more), an open whose path may
 * lead into it is not passed through by cmc_recv_passing: a start kept as a zygote
 * ends there. */
void cmc_watch_start(const char *dir);

/* Poll an epoll instance (a copy from cmc_getfd) without waiting: up to max
 * ready events, their masks in events[] and the user's 64-bit data in data[].
 * Returns the count or -errno. */
int cmc_epoll_ready(int epfd, uint32_t *events, uint64_t *data, int max);

/* Fork a node process, whose n threads tids[] are each held in a notification
 * (held[]), by injecting clone(CLONE_PARENT) at the first one's system call, then
 * in the copy one clone(CLONE_THREAD) per other thread, each given its original's
 * registers, signal mask, alternate signal stack, robust list, rseq area and
 * clear_child_tid (ctids[]: cmc's record of it, 0 for none), and each of the nmaps
 * mappings of maps[] mapped again from the copy's file. Every thread of the copy,
 * and every thread of the original that was stopped, is left about to make its held
 * call again (each sends a new notification on the same listener). The copy gets its own process group,
 * PR_SET_PDEATHSIG(SIGKILL) and working directory cwd; out[] gets its threads'
 * ids (out[0]: its pid), in the order of tids[]. 0 or -errno; on failure after
 * the held calls were answered, the original threads are still left about to make
 * them again. */
struct cmc_remap {
    uint64_t start, len, offset;
    int32_t prot, flags;
    const char *path;         /* the copy's file, mapped at start in its place */
};
int cmc_fork_threads(int listener, int n, const int *tids, const uint64_t *held,
                     const uint64_t *ctids, const char *cwd, int nmaps,
                     const struct cmc_remap *maps, unsigned long unshare_flags,
                     void *states, const char *known, int *out);
/* The size of what cmc_fork_threads keeps of a thread (states[]: n of them, in and
 * out): with known[i] set (i > 0), thread i's as an earlier fork gave it, the thread
 * having not run since, so that it is left in its held call (it sends no new
 * notification); every thread's, out, once the fork is made. */
int cmc_thread_state_size(void);

/* Copy a node that is a process tree of depth one: a root and its children (docs/
 * design.md, "Copies of process trees"). The root's copy is made by clone(CLONE_NEWPID)
 * with no exit signal: it is the root's child, invisible to the root's wait(-1), and
 * process 1 of a new PID namespace. Each live child joins that namespace for its
 * children, forks a helper into it, and the helper makes the child's copy with clone3
 * `set_tid` = the child's own pid as the namespace sees it; the helper is killed and
 * reaped by the child, so the copy, an orphan, goes to the namespace's first process,
 * the root's copy. An ended child not reaped yet (a zombie) is made again as a child
 * of the root's copy with its pid that exits with its status; unless keep_sigchld,
 * the SIGCHLD that sends is taken back. Every thread is copied as by cmc_fork_threads
 * (held[i] 0: thread i sleeps natively in a call the kernel restarts); each copy works
 * in cwd, the root's in a process group of its own, every child's in that group.
 * spare: a pid no process of the tree has, for the helpers. reopen[]: files each copy opens again before it runs (a process asleep natively has no
 * held call through which cmc could give it a descriptor). procs[0] is the root. out[] gets the copies' thread ids in the order of tids[], then
 * the zombies' copies' pids (one per proc, 0 for a live one). 0 or -errno. */
struct cmc_tree_proc {
    int32_t first, nthreads;  /* its threads in tids[]; 0 threads: a zombie */
    int32_t pid;              /* its pid as its parent knows it (its namespace's) */
    int32_t status;           /* a zombie's wait status */
    int32_t map_first, nmaps; /* its mappings in maps[] */
};
struct cmc_reopen {         /* a file opened again in a copy, at descriptor fd */
    int32_t proc, fd, flags, cloexec;
    int64_t pos;
    const char *path;
};
int cmc_fork_tree(int listener, int np, const struct cmc_tree_proc *procs, int n,
                  const int *tids, const uint64_t *held, const uint64_t *ctids,
                  const char *cwd, int keep_sigchld, const struct cmc_remap *maps,
                  int nreopen, const struct cmc_reopen *reopen, int spare, int *out);

/* Copy the len bytes buffered in pipe `in` into pipe `out` without taking them
 * (tee(2)): 0 or -errno. */
int cmc_tee(int in, int out, int64_t len);

/* Register in epoll instance epfd, for each i < n, the file of cmc's descriptor
 * src[i] under descriptor number num[i] (an entry is keyed by file and number: the
 * number a program will name it by), with events[i] and data[i]. Done in a forked
 * child of cmc, where those numbers can be given. 0 or -errno. */
int cmc_epoll_fill(int epfd, int n, const int *src, const int *num, const uint32_t *events,
                   const uint64_t *data);

/* kcmp(2): 0 when the two are one kernel object, 1 to 3 when not, -errno. */
int cmc_kcmp(int pid1, int pid2, int type, uint64_t idx1, uint64_t idx2);

/* tgkill(2) from cmc: 0 or -errno. */
int cmc_tgkill(int tgid, int tid, int sig);

/* Make this process a child subreaper: orphans of the node processes it starts
 * (a node's process tree: docs/target-contract.md, "Process trees") become its
 * children, to be reaped by it. */
int cmc_subreaper(void);

/* Move threads tids[0, n) to another CPU than the one the caller is pinned to (none:
 * not pinned, or no other allowed): 1 when moved, else 0. Then kill them; their
 * exits run there. */
int cmc_move_away(const int *tids, int n);
/* Reap child pid, killed, in a thread of the helper's own (on that other CPU): 0 or
 * -errno. cmc_buried waits up to timeout_ms until every pid given so is reaped, and
 * returns how many are not. */
int cmc_bury(int pid);
int cmc_buried(int timeout_ms);

/* The identity of the file at path (not following a last symlink): out[0] its
 * device, out[1] its inode number, out[2] and out[3] its birth time (seconds,
 * nanoseconds; 0 where the file system keeps none). A birth time tells a reused
 * inode number apart (the disk model: docs/design.md, "The disk"). 0 or -errno. */
int cmc_file_id(const char *path, uint64_t *out);

/* Start the guard: a process of its own group that ignores terminal signals and
 * reads, from the pipe whose write end *wfd_out gets (close-on-exec), records of
 * one int32: g > 0 "watch process group g", -g "forget it". When the pipe is
 * closed (this process is gone, however it ended) it SIGKILLs every group it
 * still watches and exits. Returns its pid or -errno. */
int cmc_guard(int *wfd_out);

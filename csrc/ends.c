/* ends.c: how node processes end: a signal to one thread (cmc_tgkill), cmc as
 * their subreaper, the killed moved off cmc's CPU and reaped by a thread of the
 * helper's own (cmc_move_away, cmc_bury), and the guard, a process that kills every
 * node's group once cmc is gone (cmc_guard).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cmc_internal.h"

int cmc_tgkill(int tgid, int tid, int sig)
{
    return syscall(SYS_tgkill, tgid, tid, sig) ? -errno : 0;
}

int cmc_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) ? -errno : 0;
}

/* ---- the ends of node processes, away from cmc's CPU ----------------------------
 * A killed process's threads exit, and its memory is torn down, on the CPU they
 * wake on. cmc runs pinned to one CPU with its nodes: threads about to be killed are
 * moved to another (cmc_move_away), and a thread of the helper's own, there, waits
 * for their ends (cmc_bury), so that neither is cmc's time. */
static cpu_set_t only(int c)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    return one;
}

static int away_cpu(void)
{
    static int pinned = -1, away = -1;
    cpu_set_t cur;
    if (sched_getaffinity(0, sizeof cur, &cur) || CPU_COUNT(&cur) != 1) return -1;
    int mine = -1;
    for (int c = 0; c < CPU_SETSIZE && mine < 0; c++)
        if (CPU_ISSET(c, &cur)) mine = c;
    if (mine == pinned) return away;
    pinned = mine;
    away = -1;
    long n = sysconf(_SC_NPROCESSORS_CONF);
    for (long i = 1; i < n && away < 0; i++) {
        int c = (int)((mine + i) % n);
        cpu_set_t one = only(c);
        /* allowed here (a cgroup's cpuset may not have it)? asked of a thread of ours */
        if (!sched_setaffinity(0, sizeof one, &one)) away = c;
    }
    sched_setaffinity(0, sizeof cur, &cur);
    return away;
}

int cmc_move_away(const int *tids, int n)
{
    int c = away_cpu();
    if (c < 0) return 0;
    cpu_set_t one = only(c);
    for (int i = 0; i < n; i++)
        sched_setaffinity(tids[i], sizeof one, &one);      /* one gone already: ESRCH */
    return 1;
}

static int bury_fds[2] = { -1, -1 };
static pid_t bury_owner;                 /* the process whose thread reaps (not a fork's) */
static pthread_mutex_t bury_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bury_cond = PTHREAD_COND_INITIALIZER;
static long bury_pending;

static void *bury_main(void *arg)
{
    int rfd = (int)(intptr_t)arg, pid;
    for (;;) {
        ssize_t r = read(rfd, &pid, sizeof pid);
        if (r < 0 && errno == EINTR) continue;
        if (r != (ssize_t)sizeof pid) return NULL;
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR) {}
        pthread_mutex_lock(&bury_lock);
        bury_pending--;
        pthread_cond_broadcast(&bury_cond);
        pthread_mutex_unlock(&bury_lock);
    }
}

int cmc_bury(int pid)
{
    if (bury_owner != getpid()) {            /* first, or in a fork of the process */
        if (pipe2(bury_fds, O_CLOEXEC)) return -errno;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);    /* no handler of cmc's runs there */
        pthread_t t;
        int e = pthread_create(&t, NULL, bury_main, (void *)(intptr_t)bury_fds[0]);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (e) {
            close(bury_fds[0]);
            close(bury_fds[1]);
            return -e;
        }
        pthread_detach(t);
        bury_owner = getpid();
        bury_pending = 0;
        int c = away_cpu();
        if (c >= 0) {
            cpu_set_t one = only(c);
            pthread_setaffinity_np(t, sizeof one, &one);
        }
    }
    pthread_mutex_lock(&bury_lock);
    bury_pending++;
    pthread_mutex_unlock(&bury_lock);
    if (write(bury_fds[1], &pid, sizeof pid) != (ssize_t)sizeof pid) {
        int e = errno;
        pthread_mutex_lock(&bury_lock);
        bury_pending--;
        pthread_mutex_unlock(&bury_lock);
        return -e;
    }
    return 0;
}

int cmc_buried(int timeout_ms)
{
    if (bury_owner != getpid()) return 0;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&bury_lock);
    while (bury_pending > 0 && !pthread_cond_timedwait(&bury_cond, &bury_lock, &until)) {}
    long left = bury_pending;
    pthread_mutex_unlock(&bury_lock);
    return (int)left;
}

/* The guard's loop: kill every group it was told of once cmc is gone. */
#define GUARD_MAX 65536
static void guard_main(int rfd)
{
    static int32_t groups[GUARD_MAX];
    int n = 0;
    for (;;) {
        int32_t rec;
        ssize_t got = read(rfd, &rec, sizeof rec);
        if (got < 0 && errno == EINTR) continue;
        if (got != (ssize_t)sizeof rec) break;           /* EOF: cmc is gone */
        if (rec > 0) {
            if (n < GUARD_MAX) groups[n++] = rec;
        } else {
            for (int i = n - 1; i >= 0; i--)
                if (groups[i] == -rec) { groups[i] = groups[--n]; break; }
        }
    }
    for (int i = 0; i < n; i++)
        kill(-groups[i], SIGKILL);
    _exit(0);
}

int cmc_guard(int *wfd_out)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) return -errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        /* its own group, deaf to the terminal's and cmc's signals */
        setpgid(0, 0);
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        int deaf[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU };
        for (unsigned i = 0; i < sizeof deaf / sizeof deaf[0]; i++)
            sigaction(deaf[i], &ign, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (dup2(p[0], 0) < 0) _exit(1);
        syscall(SYS_close_range, 1U, ~0U, 0U);   /* nothing of cmc's is kept open */
        guard_main(0);
    }
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(p[0]);
    if (pid < 0) { close(p[1]); return -e; }
    *wfd_out = p[1];
    return pid;
}

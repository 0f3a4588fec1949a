/* pidns_tree: can a copy of a process tree keep its pids? A spike for issue 33 (copies
 * of process trees; docs/design.md, "Copies of threaded nodes"). Run as root:
 *
 *     gcc -O -o /tmp/pidns_tree experiments/pidns_tree.c && /tmp/pidns_tree
 *
 * The tree: R (this program, "the root") and its child C. The copy, made the way cmc
 * would make it by injecting calls into R and C:
 *
 *   1. R clones R' with CLONE_NEWPID and exit signal 0: R' has R's memory, is pid 1
 *      of a new namespace B, and is a child of R that R's wait(-1) never reports
 *      (only __WALL/__WCLONE see a child whose exit signal is not SIGCHLD).
 *   2. C joins B for its children (setns on /proc/R'/ns/pid: B is a descendant of C's
 *      namespace), forks Y into B, and Y makes X with clone3's set_tid = C's pid: X has
 *      C's memory and C's pid, inside B. Y exits: X, an orphan in B, goes to B's init,
 *      R'. C leaves B again (setns to its own namespace).
 *   3. So in the copy the child has the original's pid, and is the copy root's child:
 *      R' reaps X and wait() says C's pid, as R would say of C.
 *   4. A copy of the copy nests one namespace deeper (R' clones R''); Linux allows 32
 *      levels: this counts how many copies of copies a chain can make.
 *   5. The original's end does not end the copy: R is killed, R' goes on (to the
 *      subreaper, this program's first process).
 *
 * Prints what it saw and exits 0 when every point holds, 1 when one does not. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/sched.h>

static int failures;

static void check(int ok, const char *what)
{
    printf("%s  %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok)
        failures++;
}

static pid_t clone3_with(unsigned long flags, int exit_signal, pid_t tid)
{
    struct clone_args a;
    pid_t tids[1] = {tid};
    memset(&a, 0, sizeof a);
    a.flags = flags;
    a.exit_signal = exit_signal;
    if (tid) {
        a.set_tid = (unsigned long)tids;
        a.set_tid_size = 1;
    }
    return syscall(SYS_clone3, &a, sizeof a);
}

/* Step 2, as C would run it when injected: X, a copy of the caller with its pid, made
 * inside the namespace of pid `init` (pid 1 there, the copy's root). */
static pid_t copy_into(pid_t init)
{
    char path[64];
    pid_t me = getpid();
    int own = open("/proc/self/ns/pid", O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/ns/pid", init);
    int ns = open(path, O_RDONLY);
    if (own < 0 || ns < 0 || setns(ns, CLONE_NEWPID) < 0)
        return -1;
    pid_t y = fork();
    if (y == 0) {
        pid_t x = clone3_with(0, SIGCHLD, me);
        if (x == 0) {               /* X: the copy of the caller */
            usleep(200 * 1000);     /* until Y is gone and X is R''s */
            _exit(getppid() == 1 && getpid() == me ? 42 : 43);
        }
        _exit(x > 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(y, &st, 0);
    setns(own, CLONE_NEWPID);       /* C's own forks go to its own namespace again */
    close(own);
    close(ns);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? me : -1;
}

/* Step 4: how deep copies of copies go (each a pid 1 of a namespace inside the last). */
static int nest(int level)
{
    pid_t p = clone3_with(CLONE_NEWPID, SIGCHLD, 0);
    if (p < 0)
        return level;
    if (p == 0)
        _exit(nest(level + 1));
    int st;
    waitpid(p, &st, 0);
    return WEXITSTATUS(st);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "pidns_tree: run as root (CLONE_NEWPID and set_tid need "
                        "CAP_SYS_ADMIN)\n");
        return 2;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int go[2], done[2];
    if (pipe(go) || pipe(done))
        return 2;
    pid_t r = fork();               /* R, the root of the tree, under this subreaper */
    if (r == 0) {
        pid_t c = fork();
        if (c == 0) {               /* C: waits to be told whose namespace to copy into */
            pid_t init;
            if (read(go[0], &init, sizeof init) != sizeof init)
                _exit(1);
            pid_t got = copy_into(init);
            write(done[1], &got, sizeof got);
            _exit(0);
        }
        /* step 1: R' */
        pid_t r2 = clone3_with(CLONE_NEWPID, 0, 0);
        if (r2 == 0) {
            int st;
            pid_t w;
            while ((w = wait(&st)) < 0 && errno == ECHILD)
                usleep(1000);      /* until X comes to R' */
            printf("R': I am pid %d; I reaped pid %d, exit %d (C is %d)\n", getpid(), w,
                   WEXITSTATUS(st), c);
            fflush(stdout);
            _exit(w == c && WEXITSTATUS(st) == 42 ? 0 : 1);
        }
        write(go[1], &r2, sizeof r2);
        pid_t got;
        read(done[0], &got, sizeof got);
        int st = 0;
        pid_t w = waitpid(-1, &st, 0);  /* R's own wait(-1): C, never R' */
        printf("R (pid %d): C %d, R' %d, copy of C made with pid %d; R's wait(-1) "
               "gave %d\n", getpid(), c, r2, got, w);
        fflush(stdout);
        pid_t told[2] = {got == c && w != r2, r2};
        write(done[1], told, sizeof told);
        _exit(0);                   /* the original root ends before its copy */
    }
    int st;
    waitpid(r, &st, 0);
    pid_t told[2] = {0, 0};
    read(done[0], told, sizeof told);
    check(told[0], "the copy of C has C's pid, and R's wait(-1) does not see R'");
    /* step 5: R is gone; R' and C are now this subreaper's */
    int copy_ok = 0;
    pid_t w;
    while ((w = waitpid(-1, &st, 0)) > 0)
        if (w == told[1])
            copy_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    check(copy_ok, "the copy's root reaped the copy of C by C's pid, and lived on "
                   "after the original root ended");
    int depth = nest(0);
    printf("copies of copies: %d namespaces deep\n", depth);
    check(depth >= 20, "a chain of copies at least 20 deep");
    return failures ? 1 : 0;
}

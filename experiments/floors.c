/* floors: the costs cmc cannot go below, measured natively on this machine.
 *
 *   floors launch N PROG ARGS...  fork+exec PROG with fd 3 on a pipe, wait for its
 *                                 first line on fd 3 (it has started), SIGKILL its
 *                                 process group, reap; N times. Prints microseconds
 *                                 per launch, or nan if the first launch wrote no
 *                                 line within 5 s or exited first (a program that
 *                                 writes no state on fd 3: no floor by this measure).
 *   floors notify N               one seccomp user-notification round trip (a child
 *                                 calls getppid N times, a C loop answers each).
 *                                 Prints microseconds per notification.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int launch(int n, char **argv)
{
    double t0 = now();
    for (int i = 0; i < n; i++) {
        int p[2];
        if (pipe(p)) return 1;
        pid_t pid = fork();
        if (pid == 0) {
            setpgid(0, 0);          /* its own group: a forking program dies whole */
            dup2(p[1], 3);
            int null = open("/dev/null", O_RDWR);
            dup2(null, 193);
            dup2(null, 1);
            dup2(null, 2);
            execv(argv[0], argv);
            _exit(127);
        }
        setpgid(pid, pid);
        close(p[1]);
        char c = 0;
        struct pollfd w = { p[0], POLLIN, 0 };
        while ((i > 0 || poll(&w, 1, 5000) == 1) && read(p[0], &c, 1) == 1 && c != '\n') {}
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(p[0]);
        if (c != '\n') {           /* no line: timed out, or the program ended */
            printf("nan\n");
            return 0;
        }
    }
    printf("%.1f\n", (now() - t0) / n * 1e6);
    return 0;
}

static int notify(int n)
{
    int sp[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
    pid_t pid = fork();
    if (pid == 0) {
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { 4, f };
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        int l = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        char ctl[CMSG_SPACE(sizeof(int))] = {0};
        struct iovec io = { "x", 1 };
        struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET; h->cmsg_type = SCM_RIGHTS; h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &l, sizeof l);
        sendmsg(sp[0], &m, 0);
        for (int i = 0; i < n; i++) syscall(SYS_getppid);
        _exit(0);
    }
    char ctl[CMSG_SPACE(sizeof(int))], x;
    struct iovec io = { &x, 1 };
    struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    if (recvmsg(sp[1], &m, 0) < 0) return 1;
    int l;
    memcpy(&l, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof l);
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        memset(&req, 0, sizeof req);
        if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, &req)) return 1;
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.val = 42;
        ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
    printf("%.2f\n", (now() - t0) / n * 1e6);
    waitpid(pid, NULL, 0);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "launch")) return launch(atoi(argv[2]), argv + 3);
    if (argc == 3 && !strcmp(argv[1], "notify")) return notify(atoi(argv[2]));
    fprintf(stderr, "usage: floors launch N PROG ARGS... | floors notify N\n");
    return 2;
}

/*
 * machine: reports the machine it runs on, as a program sizing itself would see it.
 *
 *   machine
 *
 * Writes on fd 3 one line:
 *   {"affinity":A,"nprocs":P,"nprocs_conf":C,"online":"O","cpuinfo":I,"mem_mib":M,
 *    "meminfo_kib":K,"host":"H","cpu":U}
 * A: CPUs in its sched_getaffinity mask; P, C: get_nprocs() and get_nprocs_conf()
 * (glibc reads the files under /sys/devices/system/cpu); O: /sys/devices/system/cpu/online;
 * I: the processors listed in /proc/cpuinfo; M: sysconf(_SC_PHYS_PAGES) * page size
 * in MiB (glibc asks sysinfo); K: /proc/meminfo's MemTotal; H: gethostname (uname);
 * U: the CPU getcpu says it runs on. Then blocks in accept() on 127.0.0.1:9100.
 *
 *   machine pids
 *
 * Writes instead {"pid":P,"child":C,"childs_parent":Q,"reaped":R,"killed":K}: its own
 * getpid(), the getpid() of a child it forks and that child's getppid() (sent back
 * through a pipe), what waitpid returned for it, and whether kill(child, 0) of the
 * reaped child failed with ESRCH (1). Under `machine pids private` these are 1, 2, 1,
 * 2 and 1 on every launch.
 *
 *   machine session
 *
 * Forks a child that makes a session (and process group) of its own with setsid(), as
 * PostgreSQL's postmaster does for every child, and stays; writes
 * {"pid":P,"child":C,"sid":S}: its own getpid(), the child's pid and what its setsid()
 * returned.
 * Without a `machine pids` line cmc gives such a node a PID namespace of its own: 1,
 * 2 and 2 on every launch.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysinfo.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "misbehave.h"

static void read_file(const char *path, char *buf, size_t len)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
}

static int pids(void)
{
    int p[2];
    if (pipe(p) < 0) { perror("machine: pipe"); return 1; }
    pid_t child = fork();
    if (child == 0) {
        int ids[2] = { getpid(), getppid() };
        if (write(p[1], ids, sizeof ids) != sizeof ids) _exit(1);
        _exit(0);
    }
    int ids[2] = { 0, 0 };
    if (read(p[0], ids, sizeof ids) != sizeof ids) { perror("machine: read"); return 1; }
    pid_t reaped = waitpid(child, NULL, 0);
    int killed = kill(child, 0) < 0 && errno == ESRCH;
    char line[256];
    int n = snprintf(line, sizeof line,
                     "{\"pid\":%d,\"child\":%d,\"childs_parent\":%d,\"reaped\":%d,"
                     "\"killed\":%d}\n", getpid(), ids[0], ids[1], reaped, killed);
    if (write(3, line, (size_t)n) != n)
        perror("machine: write fd 3");
    accept(listen_on("machine", "9100"), NULL, NULL);
    return 0;
}

static int session(void)
{
    int p[2], q[2];
    if (pipe(p) < 0 || pipe(q) < 0) { perror("machine: pipe"); return 1; }
    pid_t child = fork();
    if (child == 0) {
        char c;
        close(p[1]);
        pid_t made = setsid();
        if (write(q[1], &made, sizeof made) != sizeof made) _exit(1);
        (void)!read(p[0], &c, 1);         /* until the parent ends */
        _exit(0);
    }
    close(p[0]);
    pid_t sid = 0;
    if (read(q[0], &sid, sizeof sid) != sizeof sid) { perror("machine: read"); return 1; }
    char line[256];
    int n = snprintf(line, sizeof line, "{\"pid\":%d,\"child\":%d,\"sid\":%d}\n",
                     getpid(), child, sid);
    if (write(3, line, (size_t)n) != n)
        perror("machine: write fd 3");
    accept(listen_on("machine", "9100"), NULL, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "session"))
        return session();
    if (argc > 1 && !strcmp(argv[1], "pids"))
        return pids();
    cpu_set_t set;
    CPU_ZERO(&set);
    int affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;

    char online[64];
    read_file("/sys/devices/system/cpu/online", online, sizeof online);
    online[strcspn(online, "\n")] = 0;

    static char text[65536];
    read_file("/proc/cpuinfo", text, sizeof text);
    int cpuinfo = 0;
    for (char *p = text; (p = strstr(p, "processor\t:")); p++)
        cpuinfo++;

    read_file("/proc/meminfo", text, sizeof text);
    long meminfo = -1;
    char *m = strstr(text, "MemTotal:");
    if (m)
        meminfo = atol(m + strlen("MemTotal:"));

    long mib = (long)(sysconf(_SC_PHYS_PAGES) * (long long)sysconf(_SC_PAGESIZE) >> 20);
    char host[128] = "";
    gethostname(host, sizeof host);
    unsigned cpu = 99;
    syscall(SYS_getcpu, &cpu, NULL, NULL);

    char line[512];
    int n = snprintf(line, sizeof line,
                     "{\"affinity\":%d,\"nprocs\":%d,\"nprocs_conf\":%d,\"online\":\"%s\","
                     "\"cpuinfo\":%d,\"mem_mib\":%ld,\"meminfo_kib\":%ld,\"host\":\"%s\","
                     "\"cpu\":%u}\n",
                     affinity, get_nprocs(), get_nprocs_conf(), online, cpuinfo, mib,
                     meminfo, host, cpu);
    if (write(3, line, (size_t)n) != n)
        perror("machine: write fd 3");

    accept(listen_on("machine", "9100"), NULL, NULL);   /* blocks: an emulated call */
    return 0;
}

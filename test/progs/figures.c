/*
 * figures: everything a program can read about its machine's state, as a JSON line on fd 3.
 *
 *   figures
 *
 * First burns some CPU (15 million xorshift steps, about 20 ms) so that its CPU times
 * are not zero when it runs natively, and creates "data" in its working directory
 * (10000 bytes of 'x', fsync'ed, kept open). Then writes on fd 3 one line, a JSON object
 * with these keys in this order:
 *   "statfs", "statfs_root", "fstatfs": statfs("."), statfs("/") and fstatfs of "data",
 *       each [f_type, f_bsize, f_blocks, f_bfree, f_bavail, f_files, f_ffree, f_namelen,
 *       f_frsize];
 *   "statvfs": statvfs(".") as [f_bsize, f_blocks, f_bfree, f_bavail];
 *   "rusage_self", "rusage_children", "rusage_thread": getrusage of RUSAGE_SELF,
 *       RUSAGE_CHILDREN and RUSAGE_THREAD, each [ru_utime.tv_sec, ru_utime.tv_usec,
 *       ru_stime.tv_sec, ru_stime.tv_usec, ru_maxrss, ru_minflt, ru_majflt, ru_nvcsw,
 *       ru_nivcsw];
 *   "times": [what times(&t) returned, tms_utime, tms_stime, tms_cutime, tms_cstime];
 *   "sysinfo": [uptime, totalram, freeram, procs, loads[0]] of sysinfo();
 *   "stat", "statm", "status": /proc/self/stat, /proc/self/statm, /proc/self/status as
 *       strings; "proc_stat": the first 3 lines of /proc/stat; "loadavg": /proc/loadavg;
 *       "uptime": /proc/uptime; "pid_stat": /proc/<getpid()>/stat, through that path.
 * (after "round": [N], the line's number from 0). All numbers are written as long long.
 * What failed is null. Then accepts on 127.0.0.1:9101: at each connection, appends 5000
 * bytes of 'y' to "data", fsyncs it, closes the connection and writes the line again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/times.h>
#include <unistd.h>

#include "misbehave.h"

/* The line being built, on the heap; it grows as needed. */
struct out {
    char *buf;
    size_t len, cap;
};

static void out_bytes(struct out *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (o->len + n + 1 > cap)
            cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) { perror("figures: realloc"); exit(1); }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = 0;
}

static void out_str(struct out *o, const char *s)
{
    out_bytes(o, s, strlen(s));
}

static void out_fmt(struct out *o, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) { fprintf(stderr, "figures: out_fmt\n"); exit(1); }
    out_bytes(o, tmp, (size_t)n);
}

/* text as a JSON string: quotes, backslashes and control characters escaped. */
static void json_string(struct out *o, const char *text)
{
    out_str(o, "\"");
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        switch (*p) {
        case '"':  out_str(o, "\\\""); break;
        case '\\': out_str(o, "\\\\"); break;
        case '\n': out_str(o, "\\n"); break;
        case '\r': out_str(o, "\\r"); break;
        case '\t': out_str(o, "\\t"); break;
        case '\b': out_str(o, "\\b"); break;
        case '\f': out_str(o, "\\f"); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                out_fmt(o, "\\u%04x", *p);
            else
                out_bytes(o, (const char *)p, 1);
        }
    }
    out_str(o, "\"");
}

/* ,"key": (no comma before the first key) */
static void out_key(struct out *o, const char *key)
{
    out_str(o, o->len > 1 ? ",\"" : "\"");
    out_str(o, key);
    out_str(o, "\":");
}

/* [v0,v1,...], or null when ok is 0. */
static void out_array(struct out *o, int ok, const long long *v, size_t n)
{
    if (!ok) { out_str(o, "null"); return; }
    out_str(o, "[");
    for (size_t i = 0; i < n; i++)
        out_fmt(o, i ? ",%lld" : "%lld", v[i]);
    out_str(o, "]");
}

/* Reads path into buf (up to len - 1 bytes, NUL-terminated); -1 when it fails. */
static int read_text(const char *path, char *buf, size_t len)
{
    buf[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got < len - 1) {
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) { close(fd); buf[0] = 0; return -1; }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    buf[got] = 0;
    close(fd);
    return 0;
}

/* "key":"contents of path", or "key":null. */
static void out_file(struct out *o, const char *key, const char *path, int lines)
{
    static char text[8192];
    out_key(o, key);
    if (read_text(path, text, sizeof text) < 0) { out_str(o, "null"); return; }
    if (lines > 0) {            /* keep the first `lines` lines, with their newlines */
        char *p = text;
        for (int i = 0; i < lines && p; i++) {
            p = strchr(p, '\n');
            if (p)
                p++;
        }
        if (p)
            *p = 0;
    }
    json_string(o, text);
}

static void out_statfs(struct out *o, const char *key, int ok, const struct statfs *s)
{
    long long v[9] = {
        (long long)s->f_type, (long long)s->f_bsize, (long long)s->f_blocks,
        (long long)s->f_bfree, (long long)s->f_bavail, (long long)s->f_files,
        (long long)s->f_ffree, (long long)s->f_namelen, (long long)s->f_frsize,
    };
    out_key(o, key);
    out_array(o, ok, v, 9);
}

static void out_rusage(struct out *o, const char *key, int who)
{
    struct rusage r;
    memset(&r, 0, sizeof r);
    int ok = getrusage(who, &r) == 0;
    long long v[9] = {
        (long long)r.ru_utime.tv_sec, (long long)r.ru_utime.tv_usec,
        (long long)r.ru_stime.tv_sec, (long long)r.ru_stime.tv_usec,
        (long long)r.ru_maxrss, (long long)r.ru_minflt, (long long)r.ru_majflt,
        (long long)r.ru_nvcsw, (long long)r.ru_nivcsw,
    };
    out_key(o, key);
    out_array(o, ok, v, 9);
}

/* Something to compute for about 20 ms, so that native CPU times are not zero. */
volatile unsigned long long burn_sink;

static void burn(void)
{
    unsigned long long x = 88172645463325252ULL;
    for (int i = 0; i < 15000000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        burn_sink = x;
    }
}

/* Creates ./data: 10000 bytes of 'x', fsync'ed; returns the fd, kept open (-1 on failure). */
static int make_data(void)
{
    int fd = open("data", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) { perror("figures: open data"); return -1; }
    static char xs[10000];
    memset(xs, 'x', sizeof xs);
    size_t done = 0;
    while (done < sizeof xs) {
        ssize_t n = write(fd, xs + done, sizeof xs - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { perror("figures: write data"); break; }
        done += (size_t)n;
    }
    if (fsync(fd) < 0)
        perror("figures: fsync data");
    return fd;
}

static void write_all(int fd, const char *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { perror("figures: write fd 3"); return; }
        done += (size_t)n;
    }
}

static void gather(int data, int round)
{
    struct out o = { 0 };
    out_str(&o, "{");
    out_key(&o, "round");
    long long r = round;
    out_array(&o, 1, &r, 1);

    struct statfs sf;
    memset(&sf, 0, sizeof sf);
    out_statfs(&o, "statfs", statfs(".", &sf) == 0, &sf);
    memset(&sf, 0, sizeof sf);
    out_statfs(&o, "statfs_root", statfs("/", &sf) == 0, &sf);
    memset(&sf, 0, sizeof sf);
    out_statfs(&o, "fstatfs", data >= 0 && fstatfs(data, &sf) == 0, &sf);

    struct statvfs sv;
    memset(&sv, 0, sizeof sv);
    int ok = statvfs(".", &sv) == 0;
    long long vfs[4] = { (long long)sv.f_bsize, (long long)sv.f_blocks,
                         (long long)sv.f_bfree, (long long)sv.f_bavail };
    out_key(&o, "statvfs");
    out_array(&o, ok, vfs, 4);

    out_rusage(&o, "rusage_self", RUSAGE_SELF);
    out_rusage(&o, "rusage_children", RUSAGE_CHILDREN);
    out_rusage(&o, "rusage_thread", RUSAGE_THREAD);

    struct tms t;
    memset(&t, 0, sizeof t);
    errno = 0;
    clock_t ticks = times(&t);
    ok = !(ticks == (clock_t)-1 && errno);
    long long tv[5] = { (long long)ticks, (long long)t.tms_utime, (long long)t.tms_stime,
                        (long long)t.tms_cutime, (long long)t.tms_cstime };
    out_key(&o, "times");
    out_array(&o, ok, tv, 5);

    struct sysinfo si;
    memset(&si, 0, sizeof si);
    ok = sysinfo(&si) == 0;
    long long sv5[5] = { (long long)si.uptime, (long long)si.totalram, (long long)si.freeram,
                         (long long)si.procs, (long long)si.loads[0] };
    out_key(&o, "sysinfo");
    out_array(&o, ok, sv5, 5);

    out_file(&o, "stat", "/proc/self/stat", 0);
    out_file(&o, "statm", "/proc/self/statm", 0);
    out_file(&o, "status", "/proc/self/status", 0);
    out_file(&o, "proc_stat", "/proc/stat", 3);
    out_file(&o, "loadavg", "/proc/loadavg", 0);
    out_file(&o, "uptime", "/proc/uptime", 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)getpid());
    out_file(&o, "pid_stat", path, 0);

    out_str(&o, "}\n");
    write_all(3, o.buf, o.len);
    free(o.buf);
}

int main(void)
{
    burn();
    int data = make_data();
    int listener = listen_on("figures", "9101");
    for (int round = 0;; round++) {
        gather(data, round);
        int c = accept(listener, NULL, NULL);         /* blocks: an emulated call */
        if (c < 0)
            return 1;
        char more[5000];                            /* a connection: the file grows */
        memset(more, 'y', sizeof more);
        write_all(data, more, sizeof more);
        fsync(data);
        close(c);
    }
}

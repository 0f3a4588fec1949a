/* disk_ops: one way of writing files, then what a CRASH left of them (the disk model,
 * docs/target-contract.md, "The disk"; test/test_disk.py).
 *
 *   disk_ops MODE
 *
 * At its first start (CMC_INCARNATION 0) the node does MODE's file calls in its
 * working directory; at every start it then writes its state on fd 3 --
 * {"inc":N,"files":[[name, contents], ...]} with every file and directory under its
 * working directory, sorted, a directory as [name + "/", ""] -- and waits for ever
 * (in accept on 127.0.0.1:7990).
 * After a CRASH the state says what the disk kept. A MODE that must be refused by cmc
 * (a shared writable mapping of a file, a splice into one) does its call and stops.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "disk_ops: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int make(const char *name, int flags)
{
    int fd = open(name, O_WRONLY | O_CREAT | flags, 0644);
    if (fd < 0) die(name);
    return fd;
}

static void put(int fd, const char *s)
{
    if (write(fd, s, strlen(s)) != (ssize_t)strlen(s)) die("write");
}

static void sync_fd(int fd)
{
    if (fsync(fd) < 0) die("fsync");
}

static void sync_dir(const char *name)
{
    int fd = open(name, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) < 0) die("fsync of a directory");
    close(fd);
}

static void ops(const char *mode)
{
    int fd, g;
    if (!strcmp(mode, "write")) {              /* never synced: empty after a CRASH */
        put(make("f", 0), "abc");
    } else if (!strcmp(mode, "fsync")) {       /* the synced part stays */
        fd = make("f", 0);
        put(fd, "abc");
        sync_fd(fd);
        put(fd, "def");
    } else if (!strcmp(mode, "fdatasync")) {
        fd = make("f", 0);
        put(fd, "abc");
        if (fdatasync(fd) < 0) die("fdatasync");
        put(fd, "def");
    } else if (!strcmp(mode, "pwrite")) {      /* an overwrite in the middle */
        fd = make("f", 0);
        put(fd, "aaaa");
        sync_fd(fd);
        if (pwrite(fd, "XY", 2, 1) != 2) die("pwrite");
    } else if (!strcmp(mode, "writev")) {
        fd = make("f", 0);
        struct iovec iov[2] = {{"hello ", 6}, {"world", 5}};
        if (writev(fd, iov, 2) != 11) die("writev");
        sync_fd(fd);
        struct iovec more[1] = {{"!", 1}};
        if (pwritev(fd, more, 1, 11) != 1) die("pwritev");
    } else if (!strcmp(mode, "append")) {      /* O_APPEND after a seek */
        fd = make("f", O_APPEND);
        put(fd, "one");
        sync_fd(fd);
        lseek(fd, 0, SEEK_SET);
        put(fd, "two");
    } else if (!strcmp(mode, "osync")) {       /* O_SYNC writes are durable as made */
        fd = make("f", O_SYNC);
        put(fd, "sync");
        g = make("g", O_DSYNC);
        put(g, "dsync");
    } else if (!strcmp(mode, "pwritev2")) {    /* RWF_DSYNC on one write only */
        fd = make("f", 0);
        struct iovec iov[1] = {{"durable", 7}};
        if (pwritev2(fd, iov, 1, -1, RWF_DSYNC) != 7) die("pwritev2");
        struct iovec rest[1] = {{" not", 4}};
        if (pwritev2(fd, rest, 1, -1, 0) != 4) die("pwritev2");
    } else if (!strcmp(mode, "ftruncate")) {
        fd = make("f", 0);
        put(fd, "abcdef");
        sync_fd(fd);
        if (ftruncate(fd, 2) < 0) die("ftruncate");
    } else if (!strcmp(mode, "truncate")) {
        fd = make("f", 0);
        put(fd, "abcdef");
        sync_fd(fd);
        if (truncate("f", 4) < 0) die("truncate");
    } else if (!strcmp(mode, "otrunc")) {      /* open(O_TRUNC) of a synced file */
        fd = make("f", 0);
        put(fd, "abc");
        sync_fd(fd);
        close(fd);
        put(make("f", O_TRUNC), "x");
    } else if (!strcmp(mode, "fallocate")) {
        fd = make("f", 0);
        put(fd, "ab");
        sync_fd(fd);
        if (fallocate(fd, 0, 0, 4) < 0) die("fallocate");
    } else if (!strcmp(mode, "sync_file_range")) {
        fd = make("f", 0);
        put(fd, "waited");
        if (sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER) < 0) die("sync_file_range");
        g = make("g", 0);
        put(g, "started");                     /* writeback started, not waited for */
        if (sync_file_range(g, 0, 0, SYNC_FILE_RANGE_WRITE) < 0) die("sync_file_range");
    } else if (!strcmp(mode, "sync")) {
        put(make("f", 0), "one");
        put(make("g", 0), "two");
        sync();
    } else if (!strcmp(mode, "syncfs")) {
        put(make("f", 0), "one");
        fd = make("g", 0);
        put(fd, "two");
        if (syncfs(fd) < 0) die("syncfs");
    } else if (!strcmp(mode, "rename")) {      /* a replaced file, no directory fsync */
        fd = make("state", 0);
        put(fd, "old");
        sync_fd(fd);
        sync_dir(".");
        fd = make("state.tmp", 0);
        put(fd, "new");
        sync_fd(fd);
        if (rename("state.tmp", "state") < 0) die("rename");
    } else if (!strcmp(mode, "rename+dir")) {  /* ... and with it */
        fd = make("state", 0);
        put(fd, "old");
        sync_fd(fd);
        sync_dir(".");
        fd = make("state.tmp", 0);
        put(fd, "new");
        sync_fd(fd);
        if (rename("state.tmp", "state") < 0) die("rename");
        sync_dir(".");
    } else if (!strcmp(mode, "mkdir")) {       /* a synced directory in an unsynced one */
        if (mkdir("d", 0755) < 0) die("mkdir");
        fd = make("d/f", 0);
        put(fd, "inner");
        sync_fd(fd);
        sync_dir("d");
    } else if (!strcmp(mode, "mkdir+parent")) {
        if (mkdir("d", 0755) < 0) die("mkdir");
        fd = make("d/f", 0);
        put(fd, "inner");
        sync_fd(fd);
        sync_dir("d");
        sync_dir(".");
    } else if (!strcmp(mode, "unlink")) {      /* a removed name, no directory fsync */
        fd = make("f", 0);
        put(fd, "kept");
        sync_fd(fd);
        sync_dir(".");
        if (unlink("f") < 0) die("unlink");
    } else if (!strcmp(mode, "mmap") || !strcmp(mode, "mmap+msync")) {
        /* stores through a shared mapping: unsynced until msync(MS_SYNC) */
        fd = open("f", O_RDWR | O_CREAT, 0644);
        if (fd < 0) die("f");
        put(fd, "mapped");
        sync_fd(fd);
        sync_dir(".");
        char *p = mmap(NULL, 6, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) die("mmap");
        memcpy(p, "stored", 6);
        if (mode[4] == '+' && msync(p, 6, MS_SYNC) < 0) die("msync");
    } else if (!strcmp(mode, "mmap-private")) { /* copy-on-write: nothing reaches f */
        fd = make("f", 0);
        put(fd, "mapped");
        sync_fd(fd);
        int r = open("f", O_RDONLY);
        char *p = mmap(NULL, 6, PROT_READ | PROT_WRITE, MAP_PRIVATE, r, 0);
        if (p == MAP_FAILED) die("mmap");
        p[0] = 'X';
    } else if (!strcmp(mode, "copy")) {        /* as cat and cp copy a file */
        fd = make("f", 0);
        put(fd, "source");
        int in = open("f", O_RDONLY);
        g = make("g", 0);
        loff_t off = 0;
        if (copy_file_range(in, &off, g, NULL, 6, 0) != 6) die("copy_file_range");
    } else if (!strcmp(mode, "sendfile")) {
        fd = make("f", 0);
        put(fd, "source");
        sync_fd(fd);
        int in = open("f", O_RDONLY);
        g = make("g", 0);
        if (sendfile(g, in, NULL, 6) != 6) die("sendfile");
    } else if (!strcmp(mode, "splice")) {      /* from a pipe: refused */
        int p[2];
        if (pipe(p) < 0) die("pipe");
        put(p[1], "piped");
        g = make("g", 0);
        splice(p[0], NULL, g, NULL, 5, 0);
        exit(0);
    } else if (!strcmp(mode, "outside")) {     /* a file elsewhere: not the node's */
        fd = open("/dev/null", O_WRONLY);
        put(fd, "nothing");
        if (fsync(fd) < 0 && errno != EINVAL) die("fsync /dev/null");
        int p[2];
        if (pipe(p) < 0) die("pipe");
        put(p[1], "pipe");
        put(make("f", 0), "mine");
    } else {
        fprintf(stderr, "disk_ops: unknown mode %s\n", mode);
        exit(2);
    }
}

/* JSON string of s[0..n) (bytes outside printable ASCII as \u00XX). */
static void json_string(FILE *out, const char *s, size_t n)
{
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void list(FILE *out, const char *dir, int *first)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) die("scandir");
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..")) { free(names[i]); continue; }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        const char *rel = path + 2;            /* without "./" */
        struct stat st;
        if (lstat(path, &st) < 0) die(path);
        fputs(*first ? "[" : ",[", out);
        *first = 0;
        if (S_ISDIR(st.st_mode)) {
            char slashed[4100];
            snprintf(slashed, sizeof slashed, "%s/", rel);
            json_string(out, slashed, strlen(slashed));
            fputs(",\"\"]", out);
            list(out, path, first);
        } else {
            static char buf[65536];
            int fd = open(path, O_RDONLY);
            ssize_t got = fd < 0 ? 0 : read(fd, buf, sizeof buf);
            if (fd >= 0) close(fd);
            json_string(out, rel, strlen(rel));
            fputc(',', out);
            json_string(out, buf, got > 0 ? (size_t)got : 0);
            fputc(']', out);
        }
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: disk_ops MODE\n");
        return 2;
    }
    const char *inc = getenv("CMC_INCARNATION");
    int incarnation = inc ? atoi(inc) : 0;
    if (incarnation == 0)
        ops(argv[1]);
    char *text;
    size_t len;
    FILE *out = open_memstream(&text, &len);
    int first = 1;
    fprintf(out, "{\"inc\":%d,\"files\":[", incarnation);
    list(out, ".", &first);
    fputs("]}\n", out);
    fclose(out);
    if (write(3, text, len) != (ssize_t)len) die("write fd 3");
    /* wait for ever in a call cmc emulates: an accept no client will answer */
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7990),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 1) < 0)
        die("listen");
    accept(ls, NULL, NULL);
    return 0;
}

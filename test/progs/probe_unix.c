/*
 * probe_unix: what stays native -- AF_UNIX sockets, pipes, files in the node's
 * working directory, and the state descriptors 3 and 193.
 *
 *   probe_unix              (one node)
 *
 * Checks: the working directory starts empty; files can be created, written,
 * fsync'd, read back, renamed, listed and removed there; socketpair(AF_UNIX) carries
 * bytes both ways, with poll and shutdown; a named AF_UNIX socket in the working
 * directory accepts a connection; socketpair(AF_INET) is EOPNOTSUPP; a pipe carries
 * bytes and reports POLLHUP once its writer is closed; fds 3 and 193 are real
 * write-only descriptors (fstat, fcntl, lseek work); the durable line on fd 193.
 */

#include "probe.h"

#include <dirent.h>
#include <sys/un.h>

static int entries(void)
{
    DIR *d = opendir(".");
    int n = 0;
    struct dirent *e;
    if (!d) {
        fail("opendir(.): %s", en(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

int main(void)
{
    p_init();
    CHECK("the working directory starts empty", entries(), 0);
    int f = (int)OK("open(file, O_CREAT)", open("file", O_CREAT | O_WRONLY | O_TRUNC, 0644));
    CHECK("write a file", write(f, "persist\n", 8), 8);
    OK("fsync a file", fsync(f));
    OK("close a file", close(f));
    OK("rename", rename("file", "file2"));
    OK("mkdir", mkdir("sub", 0755));
    CHECK("two entries", entries(), 2);
    char buf[64] = "";
    f = (int)OK("open(file2)", open("file2", O_RDONLY));
    CHECK("read the file back", read(f, buf, sizeof buf), 8);
    MEM("file contents", buf, 8, "persist\n");
    CHECK("lseek on a file", lseek(f, 2, SEEK_SET), 2);
    CHECK("read after lseek", read(f, buf, 3), 3);
    MEM("file contents after lseek", buf, 3, "rsi");
    close(f);
    OK("unlink", unlink("file2"));
    OK("rmdir", rmdir("sub"));
    CHECK("empty again", entries(), 0);
    phase();

    int sv[2];
    OK("socketpair(AF_UNIX)", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK("socketpair: a real descriptor (< 500)", sv[0] < 500 && sv[1] < 500, 1);
    CHECK("send on a socketpair", send(sv[0], "unix", 4, 0), 4);
    struct pollfd p = { .fd = sv[1], .events = POLLIN };
    CHECK("poll on a socketpair", poll(&p, 1, -1), 1);
    CHECK("recv on a socketpair", recv(sv[1], buf, sizeof buf, 0), 4);
    MEM("unix", buf, 4, "unix");
    CHECK("and back", write(sv[1], "back", 4), 4);
    CHECK("read back", read(sv[0], buf, sizeof buf), 4);
    OK("shutdown(SHUT_WR) on a socketpair", shutdown(sv[0], SHUT_WR));
    CHECK("EOF on a socketpair", recv(sv[1], buf, sizeof buf, 0), 0);
    ERR("socketpair(AF_INET)", socketpair(AF_INET, SOCK_STREAM, 0, sv), EOPNOTSUPP);
    phase();

    struct sockaddr_un un = { .sun_family = AF_UNIX };
    strcpy(un.sun_path, "sock");
    int l = (int)OK("socket(AF_UNIX)", socket(AF_UNIX, SOCK_STREAM, 0));
    OK("bind(AF_UNIX, \"sock\")", bind(l, (struct sockaddr *)&un, sizeof un));
    OK("listen(AF_UNIX)", listen(l, 2));
    struct stat st = { 0 };
    OK("stat(sock)", stat("sock", &st));
    CHECK("the named socket is in the working directory", S_ISSOCK(st.st_mode), 1);
    int c = (int)OK("socket(AF_UNIX)", socket(AF_UNIX, SOCK_STREAM, 0));
    OK("connect(AF_UNIX)", connect(c, (struct sockaddr *)&un, sizeof un));
    int a = (int)OK("accept(AF_UNIX)", accept(l, NULL, NULL));
    CHECK("send(AF_UNIX)", send(c, "named", 5, 0), 5);
    CHECK("recv(AF_UNIX)", recv(a, buf, sizeof buf, 0), 5);
    MEM("named", buf, 5, "named");
    close(a);
    close(c);
    close(l);
    unlink("sock");
    phase();

    int pp[2];
    OK("pipe", pipe(pp));
    CHECK("write a pipe", write(pp[1], "pipe", 4), 4);
    CHECK("read a pipe", read(pp[0], buf, sizeof buf), 4);
    close(pp[1]);
    p = (struct pollfd){ .fd = pp[0], .events = POLLIN };
    CHECK("poll on a pipe whose writer is closed", poll(&p, 1, 0), 1);
    CHECK("revents: POLLHUP", p.revents, POLLHUP);
    CHECK("read at the end of a pipe", read(pp[0], buf, sizeof buf), 0);
    close(pp[0]);
    phase();

    OK("fstat(3)", fstat(3, &st));
    OK("fstat(193)", fstat(193, &st));
    CHECK("fd 3 is write-only", fcntl(3, F_GETFL) & O_ACCMODE, O_WRONLY);
    CHECK("fd 193 is write-only", fcntl(193, F_GETFL) & O_ACCMODE, O_WRONLY);
    if (lseek(3, 0, SEEK_CUR) < 0 && errno != ESPIPE)
        fail("lseek(3): %s", en(errno));
    const char *d = "{\"durable\":1}\n";
    CHECK("write fd 193", write(193, d, strlen(d)), (long)strlen(d));
    finish();
    return 0;
}

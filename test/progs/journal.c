/*
 * journal: a one-node server whose state lives in files, for the --fast tests
 * (a copied world must get its own files and its own file offsets).
 *
 *   journal PORT [--pipe | --unix | --abs]
 *
 * At start it opens, and keeps open: "journal" (O_APPEND, for writing), the same
 * file again for reading (its offset advances as it reads what was appended), and
 * the working directory (O_DIRECTORY, fsynced after each change), and reads what the
 * journal already holds. Each line "W x"
 * received is appended to the journal and fsynced; then "last" is written by
 * path (open, write, rename over; relative to the working directory), the count of
 * writes in $HOME/count is read and written again (cmc sets HOME to the working
 * directory; fopen each time, by the absolute path), and the
 * journal is read on from the reading offset, and "OK x" is the reply. Its state on fd 3 is what it read
 * so far, the size of the journal (fstat) and the content of "last".
 *
 * A line "Q" makes it exit with status 0.
 *
 * --pipe: also keep a self-pipe that holds one byte: each "W x" puts x in and takes
 * the oldest byte out, which the state shows as "piped" (a copy must get a pipe of
 * its own, holding what the original's holds).
 * --unix: also keep an AF_UNIX socket pair open (a world that cannot be copied: the
 * pair would be shared with the copy, so cmc replays it instead).
 * --abs: write "last" by the absolute path of the working directory taken at start
 * (a copy made by --fast would write into the original's directory: cmc must say so).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CONNS 8

static int wfd, rfd, dfd;
static char seen[4096];
static size_t nseen;
static char last[256] = "";
static char dir[4096] = ".";     /* with --abs: getcwd() at start */
static long homecount;      /* writes counted in $HOME/count (HOME is the directory) */
static int sp[2] = { -1, -1 };  /* --pipe */
static char piped = '-';    /* the byte last taken out of it */

static void emit(void)
{
    struct stat st;
    char line[8192];
    if (fstat(wfd, &st) < 0) { perror("journal: fstat"); exit(1); }
    int n = snprintf(line, sizeof line,
                     "{\"read\":\"%.*s\",\"size\":%ld,\"last\":\"%s\",\"count\":%ld,"
                     "\"piped\":\"%c\"}\n",
                     (int)nseen, seen, (long)st.st_size, last, homecount, piped);
    if (write(3, line, (size_t)n) != n) { perror("journal: fd 3"); exit(1); }
}

static void read_on(void)
{
    for (;;) {              /* read on from where this descriptor's offset is */
        ssize_t r = read(rfd, seen + nseen, sizeof seen - 1 - nseen);
        if (r < 0) { perror("journal: read"); exit(1); }
        if (r == 0) break;
        nseen += (size_t)r;
    }
}

static void take(const char *x)
{
    char rec[300];
    int n = snprintf(rec, sizeof rec, "%s;", x);
    if (write(wfd, rec, (size_t)n) != n || fsync(wfd) < 0) { perror("journal: append"); exit(1); }
    char tmp[4200], fin[4200];
    snprintf(tmp, sizeof tmp, "%s/last.tmp", dir);
    snprintf(fin, sizeof fin, "%s/last", dir);
    int t = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (t < 0 || write(t, x, strlen(x)) != (ssize_t)strlen(x) || fsync(t) < 0 || close(t) < 0 ||
        rename(tmp, fin) < 0 || fsync(dfd) < 0) { perror("journal: last"); exit(1); }
    int l = open(fin, O_RDONLY);
    ssize_t got = l < 0 ? -1 : read(l, last, sizeof last - 1);
    if (got < 0) { perror("journal: read last"); exit(1); }
    last[got] = 0;
    close(l);
    char path[4096];
    const char *home = getenv("HOME");        /* cmc sets it; "." if it is unset */
    snprintf(path, sizeof path, "%s/count", home ? home : ".");
    FILE *c = fopen(path, "r");
    homecount = 0;
    if (c) { if (fscanf(c, "%ld", &homecount) != 1) homecount = 0; fclose(c); }
    c = fopen(path, "w");
    if (!c || fprintf(c, "%ld\n", ++homecount) < 0 || fflush(c) || fsync(fileno(c)) ||
        fclose(c)) { perror("journal: count"); exit(1); }
    read_on();
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: journal PORT [--pipe | --unix | --abs]\n"); return 2; }
    int port = atoi(argv[1]);
    int pair[2];
    if (argc > 2 && strcmp(argv[2], "--pipe") == 0) {
        if (pipe2(sp, O_NONBLOCK) < 0 || write(sp[1], "-", 1) != 1) { perror("pipe"); return 1; }
    }
    if (argc > 2 && strcmp(argv[2], "--unix") == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, pair) < 0) {
        perror("socketpair");
        return 1;
    }
    if (argc > 2 && strcmp(argv[2], "--abs") == 0 && !getcwd(dir, sizeof dir)) { perror("cwd"); return 1; }
    wfd = open("journal", O_WRONLY | O_CREAT | O_APPEND, 0644);
    rfd = open("journal", O_RDONLY);
    dfd = open(".", O_RDONLY | O_DIRECTORY);
    if (wfd < 0 || rfd < 0 || dfd < 0) { perror("journal: open"); return 1; }
    read_on();
    emit();

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 8) < 0) {
        perror("journal: listen");
        return 1;
    }
    int conns[MAX_CONNS], nconns = 0;
    char buf[MAX_CONNS][256];
    size_t have[MAX_CONNS];
    for (;;) {
        struct pollfd pfd[1 + MAX_CONNS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < nconns; i++)
            pfd[1 + i] = (struct pollfd){ .fd = conns[i], .events = POLLIN };
        if (poll(pfd, (nfds_t)(1 + nconns), -1) < 0) { perror("journal: poll"); return 1; }
        /* Only the connections poll() was given have a revents: one accepted below is
         * looked at from the next poll on. Downwards, so that a close, which moves the
         * last connection into slot i, moves one already looked at (or the new one). */
        int polled = nconns;
        if ((pfd[0].revents & POLLIN) && nconns < MAX_CONNS) {
            int c = accept(lfd, NULL, NULL);
            if (c >= 0) { have[nconns] = 0; conns[nconns++] = c; }
        }
        for (int i = polled - 1; i >= 0; i--) {
            if (!pfd[1 + i].revents)
                continue;
            ssize_t r = read(conns[i], buf[i] + have[i], sizeof buf[i] - 1 - have[i]);
            if (r <= 0) {
                close(conns[i]);
                conns[i] = conns[--nconns];
                have[i] = have[nconns];
                memcpy(buf[i], buf[nconns], have[i]);
                continue;
            }
            have[i] += (size_t)r;
            char *nl;
            while ((nl = memchr(buf[i], '\n', have[i]))) {
                *nl = 0;
                if (strcmp(buf[i], "Q") == 0)
                    exit(0);            /* ends by itself: alive false, peers see FIN */
                if (buf[i][0] == 'W' && buf[i][1] == ' ') {
                    if (sp[0] >= 0) {       /* x in, the oldest byte out */
                        if (write(sp[1], buf[i] + 2, 1) != 1 || read(sp[0], &piped, 1) != 1)
                            piped = '?';
                    }
                    take(buf[i] + 2);
                    emit();
                    char ok[300];
                    int n = snprintf(ok, sizeof ok, "OK %s\n", buf[i] + 2);
                    if (write(conns[i], ok, (size_t)n) != n) { perror("journal: reply"); return 1; }
                }
                size_t used = (size_t)(nl - buf[i]) + 1;
                memmove(buf[i], nl + 1, have[i] - used);
                have[i] -= used;
            }
        }
    }
}

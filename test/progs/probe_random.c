/*
 * probe_random: getrandom per (node, incarnation), CMC_INCARNATION, and a working
 * directory that survives a crash; the clock continues across the crash.
 *
 *   probe_random PORT       (the model runs two of them, with budget crash 1)
 *
 * Each incarnation draws 16 bytes twice (they differ), appends the first draw and
 * its clock to the file "draws" in its working directory, and reports them. Under
 * cmc the incarnation number in CMC_INCARNATION is the number of lines already in
 * "draws" (the directory is kept across a crash), no earlier draw repeats, and the
 * clock has not gone back. It sleeps 1 s (a FIRE) between the draws so that a crash
 * can come before or after it. getrandom's bytes go into the state: if they were not
 * a function of (node, incarnation), replaying a world would give another state and
 * cmc would report nondeterminism. AT_RANDOM (the auxv bytes) too.
 */

#include "probe.h"

#include <sys/auxv.h>
#include <sys/random.h>

static void hex(char *out, const unsigned char *b, int n)
{
    for (int i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int inc = under_cmc ? atoi(getenv("CMC_INCARNATION") ? getenv("CMC_INCARNATION") : "-1") : 0;
    unsigned char r1[16] = { 0 }, r2[16] = { 0 };   /* in the state even if a draw failed */
    CHECK("getrandom(16)", getrandom(r1, sizeof r1, 0), 16);
    CHECK("getrandom(16, GRND_NONBLOCK)", getrandom(r2, sizeof r2, GRND_NONBLOCK), 16);
    if (memcmp(r1, r2, 16) == 0)
        fail("two draws gave the same bytes");
    char h1[33], h2[33], ha[33] = "";
    hex(h1, r1, 16);
    hex(h2, r2, 16);
    const unsigned char *at = (const unsigned char *)getauxval(AT_RANDOM);
    if (at)
        hex(ha, at, 16);
    struct timespec now = { 0, 0 };
    OK("clock_gettime(CLOCK_REALTIME)", clock_gettime(CLOCK_REALTIME, &now));

    FILE *f = fopen("draws", "r");
    int lines = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f)) {
        char seen[40];
        long long at_ns = 0;
        if (sscanf(line, "%39s %lld", seen, &at_ns) == 2) {
            if (strcmp(seen, h1) == 0)
                fail("incarnation %d drew the bytes of an earlier one", inc);
            if (now.tv_sec * 1000000000LL + now.tv_nsec < at_ns)
                fail("the clock went back across a crash");
        }
        if (strncmp(line, "slept ", 6) != 0)
            lines++;
    }
    if (f)
        fclose(f);
    CHECK("CMC_INCARNATION = earlier incarnations in this working directory", inc, lines);
    f = fopen("draws", "a");
    if (!f)
        fail("cannot append to draws: %s", en(errno));
    else {
        fprintf(f, "%s %lld\n", h1, (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        if (fflush(f) || fsync(fileno(f)))      /* a CRASH keeps only what was synced */
            fail("cannot sync draws: %s", en(errno));
        fclose(f);
    }
    char state[512];
    int n = snprintf(state, sizeof state,
                     "{\"phase\":1,\"done\":false,\"fail\":[%s],\"inc\":%d,\"r\":\"%s\",\"r2\":\"%s\","
                     "\"at\":\"%s\"}\n", p_fail, inc, h1, h2, ha);
    if (write(3, state, (size_t)n) != n)
        perror("write fd 3");
    sleep(1);
    OK("clock_gettime(CLOCK_REALTIME)", clock_gettime(CLOCK_REALTIME, &now));
    f = fopen("draws", "a");
    if (f) {
        fprintf(f, "slept %lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        fclose(f);
    }
    n = snprintf(state, sizeof state,
                 "{\"phase\":2,\"done\":true,\"fail\":[%s],\"inc\":%d,\"r\":\"%s\",\"r2\":\"%s\","
                 "\"at\":\"%s\"}\n", p_fail, inc, h1, h2, ha);
    if (write(3, state, (size_t)n) != n)
        perror("write fd 3");
    if (under_cmc) {             /* stay alive (a crash needs a live node) */
        int l = tcp_listener(atoi(argv[1]), 0);
        for (;;)
            accept(l, NULL, NULL);
    }
    return 0;
}

/*
 * probe_time: the clock and sleeps.
 *
 *   probe_time              (one node)
 *
 * Under cmc the clock is logical (docs/target-contract.md, "Time"): CLOCK_REALTIME
 * starts at 2026-01-01T00:00:00Z, CLOCK_MONOTONIC and CLOCK_BOOTTIME at 1000 s, and
 * they move only when a timeout fires, by exactly its length. Natively only the bounds
 * hold (the clock moves by at least the sleep). Checks: time, gettimeofday,
 * clock_gettime of every realtime and monotonic clock; an unknown clock is EINVAL, a
 * buffer the program cannot write EFAULT;
 * nanosleep, clock_nanosleep (relative, and TIMER_ABSTIME on CLOCK_REALTIME and
 * CLOCK_MONOTONIC), sleep and usleep advance the clock by their length; a sleep of 0 or
 * to a time already past returns at once; bad arguments are EINVAL (as
 * clock_nanosleep's return value).
 */

#include "probe.h"

#include <sys/mman.h>
#include <sys/syscall.h>

static long ns_of(clockid_t c)
{
    struct timespec t;
    if (clock_gettime(c, &t) < 0) {
        fail("clock_gettime(%d): %s", (int)c, en(errno));
        return 0;
    }
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* the clock moved by exactly `want` ns under cmc, by at least that natively */
static void moved(const char *what, long before, long after, long want)
{
    long d = after - before;
    if (under_cmc ? d != want : d < want)
        fail("%s: the clock moved by %ld ns, expected %s%ld", what, d, under_cmc ? "" : ">= ", want);
}

int main(void)
{
    p_init();
    const long S = 1000000000L, EPOCH = 1767225600L;   /* 2026-01-01T00:00:00Z */
    long rt = ns_of(CLOCK_REALTIME), mono = ns_of(CLOCK_MONOTONIC);
    struct timeval tv = { 0, 0 };
    OK("gettimeofday", gettimeofday(&tv, NULL));
    time_t t1 = time(NULL), t2 = 0;
    CHECK("time(&t) returns what it stores", time(&t2), t2);
    if (under_cmc) {
        CHECK("CLOCK_REALTIME at start (ns)", rt, EPOCH * S);
        CHECK("CLOCK_MONOTONIC at start (ns)", mono, 1000 * S);
        CHECK("CLOCK_BOOTTIME at start (ns)", ns_of(CLOCK_BOOTTIME), 1000 * S);
        CHECK("CLOCK_MONOTONIC_RAW at start (ns)", ns_of(CLOCK_MONOTONIC_RAW), 1000 * S);
        CHECK("CLOCK_REALTIME_COARSE at start (s)", ns_of(CLOCK_REALTIME_COARSE) / S, EPOCH);
        CHECK("CLOCK_MONOTONIC_COARSE at start (s)", ns_of(CLOCK_MONOTONIC_COARSE) / S, 1000);
        CHECK("CLOCK_TAI at start (s)", ns_of(CLOCK_TAI) / S, EPOCH);
        CHECK("gettimeofday at start", tv.tv_sec * 1000000L + tv.tv_usec, EPOCH * 1000000L);
        CHECK("time at start", t1, EPOCH);
    } else {
        if (rt / S < EPOCH - 366L * 86400 * 10 || labs(tv.tv_sec - rt / S) > 2 || labs(t1 - rt / S) > 2)
            fail("native realtime clocks disagree: %ld %ld %ld", rt / S, (long)tv.tv_sec, (long)t1);
    }
    struct timespec ts;
    ERR("clock_gettime(an unknown clock)", clock_gettime(77, &ts), EINVAL);
    /* a timespec the program cannot be given (cmc answers a clock read in C, and leaves
       this one to Python, which says EFAULT as the kernel does) */
    ERR("clock_gettime into an unmapped page", syscall(SYS_clock_gettime, CLOCK_MONOTONIC,
                                                       (struct timespec *)8), EFAULT);
    /* ... and one in a page it may read but not write (cmc writes answers only where
       the program could write itself, not through /proc/PID/mem) */
    struct timespec *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ro == MAP_FAILED)
        fail("mmap: %s", en(errno));
    else {
        ERR("clock_gettime into a read-only page", syscall(SYS_clock_gettime, CLOCK_MONOTONIC,
                                                           ro), EFAULT);
        ERR("gettimeofday into a read-only page", syscall(SYS_gettimeofday, ro, NULL), EFAULT);
        CHECK("the read-only page is as it was", ro->tv_sec, 0);
        munmap(ro, 4096);
    }
    phase();

    long r0 = ns_of(CLOCK_REALTIME), m0 = ns_of(CLOCK_MONOTONIC), b0 = ns_of(CLOCK_BOOTTIME);
    struct timespec half = { 0, 500000000 }, rem = { 0, 0 };
    CHECK("nanosleep(0.5 s)", nanosleep(&half, &rem), 0);
    long r1 = ns_of(CLOCK_REALTIME), m1 = ns_of(CLOCK_MONOTONIC);
    moved("nanosleep 0.5 s, CLOCK_MONOTONIC", m0, m1, 500000000L);
    moved("nanosleep 0.5 s, CLOCK_REALTIME", r0, r1, 500000000L);
    moved("nanosleep 0.5 s, CLOCK_BOOTTIME", b0, ns_of(CLOCK_BOOTTIME), 500000000L);
    phase();

    struct timespec fifth = { 0, 200000000 };
    CHECK("clock_nanosleep(CLOCK_MONOTONIC, 0.2 s)", clock_nanosleep(CLOCK_MONOTONIC, 0, &fifth, NULL), 0);
    long m2 = ns_of(CLOCK_MONOTONIC);
    moved("clock_nanosleep relative 0.2 s", m1, m2, 200000000L);
    phase();

    long target = ns_of(CLOCK_REALTIME) + 300000000L;
    struct timespec abs_rt = { target / S, target % S };
    CHECK("clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, now + 0.3 s)",
          clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &abs_rt, NULL), 0);
    long r3 = ns_of(CLOCK_REALTIME);
    if (under_cmc ? r3 != target : r3 < target)
        fail("after an absolute sleep to %ld the realtime clock is %ld", target, r3);
    phase();

    long m3 = ns_of(CLOCK_MONOTONIC);
    struct timespec past = { m3 / S - 5, 0 };
    CHECK("clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, 5 s ago)",
          clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, NULL), 0);
    struct timespec zero = { 0, 0 };
    CHECK("nanosleep(0)", nanosleep(&zero, NULL), 0);
    if (under_cmc)
        CHECK("sleeps of 0 and into the past do not move the clock", ns_of(CLOCK_MONOTONIC), m3);
    struct timespec bad = { 0, 2000000000L };
    ERR("nanosleep with tv_nsec out of range", nanosleep(&bad, NULL), EINVAL);
    CHECK("clock_nanosleep with tv_nsec out of range", clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL), EINVAL);
    CHECK("clock_nanosleep on an unknown clock", clock_nanosleep(77, 0, &fifth, NULL), EINVAL);
    phase();

    long m4 = ns_of(CLOCK_MONOTONIC);
    CHECK("sleep(1)", sleep(1), 0);
    long m5 = ns_of(CLOCK_MONOTONIC);
    moved("sleep(1)", m4, m5, S);
    CHECK("usleep(1000)", usleep(1000), 0);
    moved("usleep(1000)", m5, ns_of(CLOCK_MONOTONIC), 1000000L);
    if (under_cmc) {
        CHECK("CLOCK_MONOTONIC at the end (ns)", ns_of(CLOCK_MONOTONIC), 1000 * S + 2001000000L);
        CHECK("time at the end", time(NULL), EPOCH + 2);
    }
    finish();
    return 0;
}

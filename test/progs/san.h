/* san.h: put in front of every program of a sanitizer build (`make SAN=1` passes
 * -include san.h; nothing else includes it).
 *
 * AddressSanitizer's leak checker runs when the program exits, from a task it makes
 * with clone() without CLONE_THREAD (to stop and inspect the program), and cmc refuses
 * such a clone: "called clone(flags=0x800700) to create a new process, which cmc does
 * not support (only threads)". The environment cmc gives a node is its own (ASAN_OPTIONS
 * does not reach it), so the program says it: no leak check under cmc (CMC_NODE set);
 * natively it runs. LeakSanitizer asks this at the check, when getenv works. */
#ifndef CMC_SAN_H
#define CMC_SAN_H

char *getenv(const char *name);     /* no #include: it would come before the program's
                                     * own #define _GNU_SOURCE and hide what that shows */
__attribute__((used, visibility("default"))) int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return getenv("CMC_NODE") != 0;
}

#endif

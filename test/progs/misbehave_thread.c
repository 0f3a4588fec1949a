/*
 * misbehave_thread: threads that cmc cannot run one at a time.
 *
 *   misbehave_thread spin|pi PORT
 *
 * Listens on 127.0.0.1:PORT; once a client connected it starts a second thread and
 * the main thread goes back to accept() (an emulated call that blocks):
 *   spin  the second thread spins in a loop that makes no system call, so the node
 *         never settles; cmc must stop at the watchdog naming thread 1;
 *   pi    a priority-inheritance mutex, whose futex operations cmc does not emulate
 *         (glibc already probes for them, with FUTEX_UNLOCK_PI, when the mutex is
 *         made; else the contended lock is FUTEX_LOCK_PI); cmc must say so.
 * Either way: exit status 3, never a hang.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "misbehave.h"

static pthread_mutex_t pi;

static void *second(void *arg)
{
    if (arg != NULL) {
        for (volatile unsigned long i = 0;; i++)
            ;
    }
    pthread_mutex_lock(&pi);        /* held by main: FUTEX_LOCK_PI */
    pthread_mutex_unlock(&pi);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int spin = strcmp(argv[1], "spin") == 0;
    int l = listen_on("misbehave_thread", argv[2]);
    if (accept(l, NULL, NULL) < 0) {
        perror("misbehave_thread: accept");
        return 1;
    }
    if (!spin) {
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
        pthread_mutex_init(&pi, &attr);
        pthread_mutex_lock(&pi);
    }
    pthread_t t;
    if (pthread_create(&t, NULL, second, spin ? (void *)1 : NULL) != 0) {
        perror("misbehave_thread: pthread_create");
        return 1;
    }
    for (;;)
        accept(l, NULL, NULL);
}

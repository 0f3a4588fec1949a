/*
 * yield_turns: two threads take turns through a shared word, each giving way with
 * sched_yield() until it is its turn, three turns each (a spin-then-yield hand-off, as
 * runtimes do before they sleep on a futex). Under cmc only one thread runs at a time,
 * so this ends only if sched_yield lets the other thread run first
 * (docs/target-contract.md, "Threads"): then the node reports {"turns":6} on fd 3 and
 * parks in accept().
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile int turn, turns;

static void take_turns(int me)
{
    while (turns < 6) {
        if (turn == me) {
            turns++;
            turn = !me;
        }
        sched_yield();
    }
}

static void *second(void *arg)
{
    (void)arg;
    take_turns(1);
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, second, NULL) != 0)
        return 1;
    take_turns(0);
    pthread_join(t, NULL);
    char line[32];
    int n = snprintf(line, sizeof line, "{\"turns\":%d}\n", turns);
    if (write(3, line, (size_t)n) != n)
        return 1;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    listen(l, 1);
    for (;;)
        accept(l, NULL, NULL);
}

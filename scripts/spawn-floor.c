/* The floor for the daemon's spawn-delay benchmark (scripts/bench-daemon.sh): how long this
 * machine takes to posix_spawn N `echo ok` children from a minimal C program, from one thread
 * and from two, five bursts each. No daemon can start the last of N children sooner. */
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;
static int per_thread;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *spawn_some(void *unused) {
    (void)unused;
    char *argv[] = {"echo", "ok", NULL};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", 1, 0);
    for (int i = 0; i < per_thread; i++) {
        pid_t pid;
        posix_spawn(&pid, "/bin/echo", &actions, NULL, argv, environ);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 50;
    for (int threads = 1; threads <= 2; threads++) {
        per_thread = n / threads;
        double best = 1e9, worst = 0;
        for (int round = 0; round < 5; round++) {
            pthread_t t[2];
            double start = now_ms();
            for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, spawn_some, NULL);
            for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
            double took = now_ms() - start;
            while (wait(NULL) > 0) {}
            if (took < best) best = took;
            if (took > worst) worst = took;
        }
        printf("    floor: %d spawns of echo from %d thread(s) of a C program: last spawn after %.1f to %.1f ms (5 bursts)\n",
               per_thread * threads, threads, best, worst);
    }
    return 0;
}

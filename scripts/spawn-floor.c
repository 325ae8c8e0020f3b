/* The floor for the daemon's spawn-delay benchmark (scripts/bench-daemon.sh): how long this
 * machine takes to start N `echo ok` children from a minimal C program, five bursts each:
 *   - posix_spawn (returns once the child has exec'd, as std's spawn does), from one thread
 *     and from two;
 *   - fork without waiting for the exec, from this small single-threaded process (the
 *     cheapest way to create a process; the design tried as the daemon's "launcher", see
 *     BENCHMARKS.md).
 * No daemon can start the last of N children sooner than the fork figure.
 *
 * `spawn-floor --burst AT N SCRIPT` is the floor of scripts/bench-burst.sh instead: it sleeps
 * until the wall-clock second AT (Unix time), then starts N `/bin/sh -c SCRIPT` with
 * posix_spawn from one thread, without waiting for any (stdio: /dev/null), then reaps them.
 * The children record their own start (`date +%s.%N >> FILE`), as the daemon's do. */
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

extern char **environ;
static int per_thread;
static char *echo_argv[] = {"echo", "ok", NULL};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *spawn_some(void *unused) {
    (void)unused;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", 1, 0);
    for (int i = 0; i < per_thread; i++) {
        pid_t pid;
        posix_spawn(&pid, "/bin/echo", &actions, NULL, echo_argv, environ);
    }
    return NULL;
}

static void *fork_some(void *unused) {
    (void)unused;
    for (int i = 0; i < per_thread; i++) {
        if (fork() == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            setpgid(0, 0);
            execve("/bin/echo", echo_argv, environ);
            _exit(127);
        }
    }
    return NULL;
}

static void bursts(const char *what, void *(*start)(void *), int threads, int n) {
    per_thread = n / threads;
    double best = 1e9, worst = 0;
    for (int round = 0; round < 5; round++) {
        pthread_t t[2];
        double begin = now_ms();
        if (threads == 1) {
            start(NULL);
        } else {
            for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, start, NULL);
            for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        }
        double took = now_ms() - begin;
        while (wait(NULL) > 0) {}
        if (took < best) best = took;
        if (took > worst) worst = took;
        usleep(200 * 1000);
    }
    printf("    floor: %d %s of echo from %d thread(s) of a C program: last after %.1f to %.1f ms (5 bursts)\n",
           per_thread * threads, what, threads, best, worst);
}

static int burst_at(long at, int n, char *script) {
    char *argv[] = {"sh", "-c", script, NULL};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    struct timespec due = {.tv_sec = at, .tv_nsec = 0};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &due, NULL) != 0) {}
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid;
        if (posix_spawn(&pid, "/bin/sh", &actions, NULL, argv, environ) != 0) failed++;
    }
    while (wait(NULL) > 0) {}
    if (failed) fprintf(stderr, "spawn-floor: %d of %d spawns failed\n", failed, n);
    return failed ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--burst") == 0)
        return burst_at(atol(argv[2]), atoi(argv[3]), argv[4]);
    int n = argc > 1 ? atoi(argv[1]) : 50;
    bursts("posix_spawns", spawn_some, 1, n);
    bursts("posix_spawns", spawn_some, 2, n);
    bursts("forks (no wait for exec)", fork_some, 1, n);
    return 0;
}

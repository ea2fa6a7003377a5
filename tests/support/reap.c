/*
 * reap: run one test so that it leaves nothing running. ctest starts every
 * test as `reap TEST [ARGS...]`; reap makes itself a child subreaper, so
 * whatever the test starts and abandons (a daemon that double-forked, a
 * server a failed assertion never stopped) is re-parented to reap instead
 * of to init. When the test has exited, reap gives its descendants a short
 * while to finish exiting; any still there are listed (pid and command
 * line), sent SIGTERM, SIGKILL after a grace period, and the test fails.
 *
 * The test's own verdict wins: its exit code (77, ctest's skip, included)
 * is reap's when the test failed or left nothing behind; a test killed by
 * a signal makes reap die of the same signal, so ctest reports it as such.
 * A test that passed or skipped but left processes behind exits 1.
 *
 * REAP_SETTLE_MS (default 3000) and REAP_GRACE_MS (default 5000) override
 * the two waits.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REAP_MAX 4096

static volatile sig_atomic_t test_pid;

/* ctest (or a user's ^C) stopping reap stops the test the same way. */
static void forward(int sig)
{
    if (test_pid > 0)
        kill((pid_t)test_pid, sig);
}

static long env_ms(const char *name, long dflt)
{
    const char *v = getenv(name);
    char *end;
    long n;

    if (v == NULL || *v == '\0')
        return dflt;
    n = strtol(v, &end, 10);
    return *end == '\0' && n >= 0 ? n : dflt;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Collect exited children (reap's own, and orphans re-parented to it). */
static void collect_zombies(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* The parent pid and state of `pid` from /proc/PID/stat; -1 when gone. */
static int proc_stat(pid_t pid, pid_t *ppid, char *state)
{
    char path[64], buf[1024], *p;
    FILE *f;
    size_t n;
    int pp;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (f == NULL)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name is in parentheses and may contain anything. */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %c %d", state, &pp) != 2)
        return -1;
    *ppid = (pid_t)pp;
    return 0;
}

/*
 * Every live (not zombie) descendant of reap into out[], at most `max`;
 * returns how many. Bounded: one pass over /proc, then at most `max`
 * passes over the table to close it under "parent is in it".
 */
static size_t descendants(pid_t *out, size_t max)
{
    static pid_t pids[REAP_MAX], ppids[REAP_MAX];
    static char states[REAP_MAX], in[REAP_MAX];
    pid_t self = getpid();
    size_t n = 0, i, j, count = 0;
    struct dirent *de;
    DIR *d = opendir("/proc");
    int grew = 1;

    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL && n < REAP_MAX) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);

        if (*end != '\0' || pid <= 0 || (pid_t)pid == self)
            continue;
        if (proc_stat((pid_t)pid, &ppids[n], &states[n]) < 0)
            continue;
        pids[n] = (pid_t)pid;
        in[n] = ppids[n] == self;
        n++;
    }
    closedir(d);
    for (i = 0; grew && i < n; i++) {
        grew = 0;
        for (j = 0; j < n; j++) {
            size_t k;

            if (in[j])
                continue;
            for (k = 0; k < n; k++)
                if (in[k] && pids[k] == ppids[j]) {
                    in[j] = 1;
                    grew = 1;
                    break;
                }
        }
    }
    for (i = 0; i < n && count < max; i++)
        if (in[i] && states[i] != 'Z')
            out[count++] = pids[i];
    return count;
}

static void print_process(pid_t pid)
{
    char path[64], cmd[512];
    FILE *f;
    size_t n, i;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    f = fopen(path, "re");
    n = f != NULL ? fread(cmd, 1, sizeof(cmd) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    /* Arguments are NUL-separated; the last NUL ends the line. */
    while (n > 0 && cmd[n - 1] == '\0')
        n--;
    for (i = 0; i < n; i++)
        if (cmd[i] == '\0' || cmd[i] == '\n')
            cmd[i] = ' ';
    cmd[n] = '\0';
    fprintf(stderr, "reap:   pid %d: %s\n", (int)pid, n > 0 ? cmd : "(no command line)");
}

/* Wait up to `ms` for every descendant to go; returns how many are left. */
static size_t wait_gone(long ms, pid_t *left, size_t max)
{
    long waited = 0;
    size_t n;

    for (;;) {
        collect_zombies();
        n = descendants(left, max);
        if (n == 0 || waited >= ms)
            return n;
        sleep_ms(20);
        waited += 20;
    }
}

static void signal_all(int sig, pid_t *pids, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        kill(pids[i], sig);
}

/* Stop whatever outlived the test; returns how many had. */
static size_t reap_survivors(void)
{
    static pid_t left[REAP_MAX];
    size_t n, i, found;
    int round;

    found = wait_gone(env_ms("REAP_SETTLE_MS", 3000), left, REAP_MAX);
    if (found == 0)
        return 0;
    fprintf(stderr, "reap: %zu process%s outlived the test:\n", found, found == 1 ? "" : "es");
    for (i = 0; i < found; i++)
        print_process(left[i]);
    signal_all(SIGTERM, left, found);
    n = wait_gone(env_ms("REAP_GRACE_MS", 5000), left, REAP_MAX);
    /* Bounded: a process re-parented to reap by a kill is found in the next round. */
    for (round = 0; n > 0 && round < 50; round++) {
        if (round == 0)
            fprintf(stderr, "reap: %zu still there after SIGTERM: SIGKILL\n", n);
        signal_all(SIGKILL, left, n);
        n = wait_gone(200, left, REAP_MAX);
    }
    if (n > 0)
        fprintf(stderr, "reap: %zu process%s could not be killed\n", n, n == 1 ? "" : "es");
    return found;
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    int status, code;
    pid_t pid, parent;
    size_t left;

    if (argc < 2) {
        fprintf(stderr, "usage: reap TEST [ARGS...]\n");
        return 2;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        perror("reap: PR_SET_CHILD_SUBREAPER");
        return 2;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = forward;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    fflush(NULL);
    parent = getpid();
    pid = fork();
    if (pid < 0) {
        perror("reap: fork");
        return 2;
    }
    if (pid == 0) {
        /* A reap killed outright (SIGKILL at ctest's timeout) takes the
         * test with it; what the test started is then beyond reach. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(127);
        execvp(argv[1], argv + 1);
        fprintf(stderr, "reap: cannot run %s: %s\n", argv[1], strerror(errno));
        _exit(127);
    }
    test_pid = pid;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            perror("reap: waitpid");
            return 2;
        }
    test_pid = 0;
    left = reap_survivors();
    if (WIFSIGNALED(status)) {
        /* Die the test's death, so ctest reports the signal, not a code. */
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    code = WEXITSTATUS(status);
    if (left > 0 && (code == 0 || code == 77)) {
        fprintf(stderr, "reap: the test left processes running: failed\n");
        return 1;
    }
    return code;
}

/*
 * clock_shim.c: a wall clock that a test can move, for one redis-server process (LD_PRELOAD).
 *
 * Contract
 *   - Environment: DLOCK_CLOCK_OFFSET_FILE names a file holding one signed decimal integer, the
 *     offset in microseconds added to the wall clock (missing, unreadable or empty: the last
 *     value read, 0 at first).
 *   - clock_gettime(CLOCK_REALTIME / CLOCK_REALTIME_COARSE), gettimeofday() and time() return
 *     the real wall clock plus the offset; every other clock (CLOCK_MONOTONIC, ...) is untouched,
 *     as a real wall-clock jump (NTP step, operator) leaves the monotonic clock alone.
 *   - The file is read at most once per millisecond of monotonic time, so a new offset is seen
 *     within about 1 ms of being written.
 *   - The real clocks are read with the raw system call, and nothing here allocates or resolves
 *     symbols: it is safe inside an allocator's initialisation. (libfaketime, the usual tool,
 *     deadlocks at start-up in a redis-server linked with jemalloc, as Debian's is: libfaketime
 *     issues #130 and #327.)
 *
 * Not thread-safe in its cache (two threads may both re-read the file): harmless, both read the
 * same value. Built by dlock-testkit (clock.rs) with the system C compiler.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_us(void) {
    static long long cached = 0;
    static long long read_at_ns = -1000000000LL;
    struct timespec mono;
    if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &mono) != 0) return cached;
    long long now_ns = (long long)mono.tv_sec * 1000000000LL + mono.tv_nsec;
    if (now_ns - read_at_ns < 1000000LL) return cached;
    read_at_ns = now_ns;
    const char *path = getenv("DLOCK_CLOCK_OFFSET_FILE");
    if (path == NULL) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cached;
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return cached;
    buf[n] = 0;
    char *end = NULL;
    long long value = strtoll(buf, &end, 10);
    if (end != buf) cached = value;
    return cached;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    long r = syscall(SYS_clock_gettime, id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_us() * 1000LL;
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return (int)r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    (void)tz;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    if (r == 0 && tv != NULL) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return r;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}

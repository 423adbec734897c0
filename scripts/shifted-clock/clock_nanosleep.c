/* clock_nanosleep straight to the kernel, loaded ahead of libfaketime.
 *
 * libfaketime 0.9.10 (Debian 12) returns EINVAL from clock_nanosleep(CLOCK_MONOTONIC,
 * TIMER_ABSTIME, ...) with FAKETIME_DONT_FAKE_MONOTONIC=1, which is every time.sleep() of
 * Python 3.11; without that setting, a timed wait on a condition sleeps for the 400 days of
 * the offset. With the monotonic clock left real, the kernel's own sleep is the right one:
 * only the wall clock (time(), gettimeofday, CLOCK_REALTIME) is shifted. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *request, struct timespec *remain) {
    return syscall(SYS_clock_nanosleep, clock, flags, request, remain) == -1 ? errno : 0;
}

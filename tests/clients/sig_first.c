/*
 * sig_first.c - every wrapped function POSIX lists as async-signal-safe
 * (and a few Linux adds) called for the first time from a signal handler
 * that interrupted the program's own dlsym() (a plugin probe, an FFI) or
 * malloc (docs/binding.md).  Each call is on fd -1 or does nothing, so it
 * fails or returns at once.
 *
 *   sig_first dlsym|malloc|connect SEED
 * connect: the loop connects to 127.0.0.1 port 1 (refused; run with
 * KEEPALIVE_PORTS=1 so that each connect goes through the pool's lookup
 * and its locks), then closes.
 * A timer fires at a pseudo-random moment (from SEED) within the first few
 * ms of the loop; the handler makes the calls once; the loop stops then.
 * Prints "ok N" (N: the calls made, the same with or without the shim).
 * An abort or a deadlock is the failure (run under timeout).
 */
#include <dlfcn.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t done, calls;

static void on_alarm(int sig)
{
	(void)sig;
	int saved_errno = 0;
	char b[1];
	struct iovec v = { b, 1 };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int one = 1, p[2];
	struct timeval tv0 = { 0, 0 };
	struct timespec ts0 = { 0, 0 };
#define CALL(x) ((void)(x), calls++)
	CALL(shutdown(-1, SHUT_RDWR));
	CALL(accept(-1, NULL, NULL));
	CALL(accept4(-1, NULL, NULL, 0));
	CALL(bind(-1, (struct sockaddr *)&ss, sizeof(struct sockaddr)));
	CALL(connect(-1, (struct sockaddr *)&ss, sizeof(struct sockaddr)));
	CALL(send(-1, b, 1, 0));
	CALL(sendto(-1, b, 1, 0, NULL, 0));
	CALL(sendmsg(-1, &m, 0));
	CALL(recv(-1, b, 1, 0));
	CALL(recvfrom(-1, b, 1, 0, NULL, NULL));
	CALL(recvmsg(-1, &m, 0));
	CALL(read(-1, b, 1));
	CALL(write(-1, b, 1));
	CALL(readv(-1, &v, 1));
	CALL(writev(-1, &v, 1));
	CALL(getsockopt(-1, SOL_SOCKET, SO_TYPE, &one, &sl));
	CALL(setsockopt(-1, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)));
	CALL(getpeername(-1, (struct sockaddr *)&ss, &sl));
	CALL(getsockname(-1, (struct sockaddr *)&ss, &sl));
	CALL(fcntl(-1, F_GETFL));
	CALL(dup(-1));
	CALL(dup2(-1, -1));
	CALL(dup3(-1, -1, 0));
	CALL(close(-1));
	CALL(poll(NULL, 0, 0));
	CALL(ppoll(NULL, 0, &ts0, NULL));
	CALL(select(0, NULL, NULL, NULL, &tv0));
	CALL(pselect(0, NULL, NULL, NULL, &ts0, NULL));
	CALL(waitpid(-1, NULL, WNOHANG));
	CALL(wait(NULL)); /* no child: ECHILD at once */
	CALL(sleep(0));
	CALL(nanosleep(&ts0, NULL));
	CALL(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts0, NULL));
	CALL(setuid(getuid()));
	CALL(setgid(getgid()));
	int s = socket(AF_INET, SOCK_STREAM, 0);
	calls++;
	if (s >= 0)
		close(s);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0) {
		close(p[0]);
		close(p[1]);
	}
	calls++;
	if (pipe(p) == 0) {
		close(p[0]);
		close(p[1]);
	}
	calls++;
	if (pipe2(p, O_CLOEXEC) == 0) {
		close(p[0]);
		close(p[1]);
	}
	calls++;
	int fd = open("/dev/null", O_RDONLY);
	if (fd >= 0)
		close(fd);
	fd = openat(AT_FDCWD, "/dev/null", O_RDONLY);
	if (fd >= 0)
		close(fd);
	calls += 2;
	(void)saved_errno;
	done = 1;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int malloc_mode = !strcmp(argv[1], "malloc");
	int connect_mode = !strcmp(argv[1], "connect");
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(1),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	unsigned seed = (unsigned)atoi(argv[2]);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	/* 200 us .. 3 ms into the loop */
	struct itimerval it = { { 0, 0 }, { 0, 200 + (long)(seed * 2654435761u % 2800) } };
	setitimer(ITIMER_REAL, &it, NULL);
	void *sink = NULL;
	char name[32];
	for (unsigned long i = 0; !done; i++) {
		if (connect_mode) {
			int c = socket(AF_INET, SOCK_STREAM, 0);
			if (c >= 0) {
				(void)connect(c, (struct sockaddr *)&to, sizeof(to));
				close(c);
			}
		} else if (malloc_mode) {
			void *q = malloc(16 + i % 4096);
			free(sink);
			sink = q;
		} else {
			snprintf(name, sizeof(name), "no_such_symbol_%lu", i % 97);
			sink = dlsym(RTLD_DEFAULT, name);
			(void)dlerror();
			sink = dlsym(RTLD_NEXT, "strlen");
		}
	}
	printf("ok %d\n", (int)calls);
	return 0;
}

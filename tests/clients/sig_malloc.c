/*
 * sig_malloc - connect() from a signal handler that interrupts malloc and
 * free (a timer every 700 us, 300 times): connect is async-signal-safe,
 * so the program must neither crash nor hang, with or without a second
 * thread (which makes glibc lock its arena).
 *
 *   sig_malloc HOST PORT [thread]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define SIGNALS 300
static struct sockaddr_in to;
static volatile sig_atomic_t fired, conns;

static void handler(int sig)
{
	(void)sig;
	int saved = errno;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0)
		conns++; /* kept open: each connect makes a new connection */
	else if (fd >= 0)
		close(fd);
	fired++;
	errno = saved;
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	to.sin_family = AF_INET;
	to.sin_port = htons((uint16_t)atoi(argv[2]));
	inet_pton(AF_INET, argv[1], &to.sin_addr);
	if (argc > 3) {
		pthread_t t;
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old); /* the timer hits main */
		pthread_create(&t, NULL, idle, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	struct sigaction sa = { .sa_handler = handler, .sa_flags = SA_RESTART };
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 700 }, { 0, 700 } };
	setitimer(ITIMER_REAL, &it, NULL);
	void *p[64] = { 0 };
	unsigned x = 1;
	while (fired < SIGNALS) {
		x = x * 1103515245 + 12345;
		unsigned k = (x >> 8) % 64;
		free(p[k]);
		p[k] = malloc(16 + ((x >> 16) % 3000));
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_BLOCK, &alrm, NULL); /* one may still be on its way */
	/* how many fired is the timer's business: one more may land before
	 * the loop sees the count; every one of them must have connected */
	printf("signals %s, every one connected: %s\n", fired >= SIGNALS ? "all" : "missing",
	       conns == fired ? "yes" : "no");
	return 0;
}

/*
 * sandbox_threads.c - threads doing HTTP while another installs a seccomp
 * filter (docs/owner.md "A sandbox": other threads at the install).
 *
 * Usage: sandbox_threads PORT MS
 * Eight threads each make 300 GETs of /f on a connection of
 * their own, asking to close, and read each answer to its EOF (SO_RCVTIMEO
 * 5 s: a read that waits for the server's idle timer instead fails with
 * EAGAIN); MS ms into the round the main thread installs a filter that
 * allows every call (no new privileges first).  The library steps aside at
 * the install, settling what it owes first: a request it rewrote to
 * keep-alive must not leave a thread's read waiting for the server's idle
 * close (alone its Connection: close ended the answer).  Prints whether
 * the filter went in, then one line per thread: "thread T: N requests, N
 * read to their end, K timed out" (alone K is 0).  One install a process:
 * a test runs it several times (the moment it meets varies).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define THREADS 8
#define REQUESTS 300

static int port;

struct tally {
	int ended, timed_out;
};

static void *worker(void *arg)
{
	struct tally *t = arg;
	for (int i = 0; i < REQUESTS; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
			close(s);
			continue;
		}
		struct timeval tv = { 5, 0 };
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		static const char req[] = "GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
		if (write(s, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
			close(s);
			continue;
		}
		char buf[4096];
		ssize_t r;
		while ((r = read(s, buf, sizeof(buf))) > 0)
			;
		if (r == 0)
			t->ended++;
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			t->timed_out++;
		close(s);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: sandbox_threads PORT MS\n");
		return 2;
	}
	port = atoi(argv[1]);
	int ms = atoi(argv[2]);
	pthread_t th[THREADS];
	struct tally t[THREADS];
	memset(t, 0, sizeof(t));
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, &t[i]);
	usleep((useconds_t)ms * 1000);
	struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { 1, allow };
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	printf("filter %s\n", prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? "refused" : "in");
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		printf("thread %d: %d requests, %d read to their end, %d timed out\n", i, REQUESTS,
		       t[i].ended, t[i].timed_out);
	}
	return 0;
}

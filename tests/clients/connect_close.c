/*
 * connect_close.c - another thread closes a socket while its blocking
 * connect() waits (docs/hold.md "A close during a connect").
 *
 * Usage: connect_close PORT      (no server: the program makes its own)
 *
 * A listener on 127.0.0.1:PORT with a backlog of 0 takes one connection
 * (made and left unaccepted), so the next SYN is dropped: thread A's
 * blocking connect() to PORT waits.  Once A is seen inside connect() (its
 * /proc/self/task/TID/syscall: an event, no timing), the main thread
 * closes A's fd, then the listener: the SYN's retransmission meets a
 * closed port and A's connect() fails.  Alone: "connect: -1 Connection
 * refused".  The library once freed the connection under A's call (a
 * NULL dereference at its failure).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "await_syscall.h"

static struct sockaddr_in addr;
static int sock;
static volatile pid_t a_tid;

static void *connector(void *arg)
{
	(void)arg;
	a_tid = (pid_t)syscall(SYS_gettid);
	int r = connect(sock, (struct sockaddr *)&addr, sizeof(addr));
	printf("connect: %d %s\n", r, r ? strerror(errno) : "");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: connect_close PORT\n");
		return 2;
	}
	addr.sin_family = AF_INET;
	addr.sin_port = htons((unsigned short)atoi(argv[1]));
	inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&addr, sizeof(addr)) || listen(l, 0)) {
		perror("listen");
		return 1;
	}
	/* the one connection a backlog of 0 queues: the next SYN is dropped */
	int first = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(first, (struct sockaddr *)&addr, sizeof(addr))) {
		perror("first connect");
		return 1;
	}
	sock = socket(AF_INET, SOCK_STREAM, 0);
	pthread_t t;
	pthread_create(&t, NULL, connector, NULL);
	while (!a_tid)
		usleep(100);
	await_syscall(a_tid, SYS_connect, sock, "connect");
	printf("close during connect: %d\n", close(sock));
	fflush(stdout);
	close(l);
	pthread_join(t, NULL);
	close(first);
	printf("survived\n");
	return 0;
}

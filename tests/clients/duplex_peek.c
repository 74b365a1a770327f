/*
 * duplex_peek - one thread peeks at a connection (recv MSG_PEEK |
 * MSG_DONTWAIT, in a loop) while the main thread writes N request heads
 * on it, each in two writes (the head, then its final CRLF: the library
 * holds the first piece, docs/hold.md).  The hint the read wrappers take
 * without the connection's lock (kp_conn_holds: held_len, req_mode) met
 * the writer's stores: ThreadSanitizer's report under the TSan build
 * (tests/survive.bats).
 *
 * Usage: duplex_peek PORT N        (an HTTP server on 127.0.0.1:PORT)
 * Prints "wrote N heads".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fd;
static volatile int stop;

static void *peek(void *arg)
{
	char b[4096];
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
		recv(fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: duplex_peek PORT N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		return 1;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, peek, NULL))
		return 1;
	for (int i = 0; i < n; i++) {
		char q[128];
		int l = snprintf(q, sizeof(q), "GET /duplex/%d HTTP/1.1\r\nHost: t\r\n", i);
		if (write(fd, q, (size_t)l) != l || write(fd, "\r\n", 2) != 2) {
			perror("write");
			return 1;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	printf("wrote %d heads\n", n);
	return 0;
}

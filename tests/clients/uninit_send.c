/*
 * uninit_send.c - what a program checked by valgrind (memcheck) does
 * every day: it writes its request from a heap buffer whose first bytes
 * it never wrote (the request starts at an odd offset), with write,
 * send, writev and sendmsg in turn, each on a fresh connect() with
 * Connection: close, and prints each answer's status line.  Alone
 * memcheck reports nothing: the kernel reads only the bytes passed.
 *
 * usage: uninit_send port rounds
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(0x7f000001);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		perror("connect");
		exit(2);
	}
	return fd;
}

static void send_one(int fd, int how, const char *req, size_t n)
{
	struct iovec iov = { .iov_base = (void *)req, .iov_len = n };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r = how == 0 ? write(fd, req, n) :
		    how == 1 ? send(fd, req, n, 0) :
		    how == 2 ? writev(fd, &iov, 1) : sendmsg(fd, &msg, 0);
	if (r != (ssize_t)n) {
		perror("send");
		exit(3);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int port = atoi(argv[1]), rounds = atoi(argv[2]);
	for (int i = 0; i < rounds; i++) {
		char *buf = malloc(4096); /* its first 3 bytes never written */
		char *req = buf + 3;
		int n = snprintf(req, 4093, "GET /f?n=%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", i);
		int fd = dial(port);
		send_one(fd, i % 4, req, (size_t)n);
		char got[65536];
		size_t have = 0;
		ssize_t r;
		while (have < sizeof(got) - 1 && (r = read(fd, got + have, sizeof(got) - 1 - have)) > 0)
			have += (size_t)r;
		got[have] = 0;
		char *eol = strstr(got, "\r\n");
		printf("%d: %.*s\n", i, eol ? (int)(eol - got) : (int)have, got);
		close(fd);
		free(buf);
	}
	return 0;
}

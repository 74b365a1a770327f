/*
 * waitall_more.c - MSG_WAITALL reads the split of docs/replay.md
 * "recv(MSG_WAITALL)" once left to the kernel: recv(MSG_PEEK|MSG_WAITALL),
 * recvmsg(MSG_PEEK|MSG_WAITALL), recvmsg(MSG_WAITALL) over an iovec of
 * more than 64 entries, recvmmsg(MSG_WAITALL).  Each asks for more than
 * the answer holds, after a request that asks to close: alone the
 * server's close ends the wait at once; on a rewritten request the
 * kernel's wait would last until the server's idle timeout.  Then it
 * reads to EOF.  Prints what each call returned (the count aside: a
 * Connection header may differ, hop-by-hop).
 *
 * usage: waitall_more port peek|peekmsg|iov65|iov300|mmsg requests
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define WANT 65536
static char buf[WANT];
static struct iovec iov[300];

static ssize_t call(int fd, const char *mode)
{
	struct iovec one = { buf, WANT };
	struct msghdr m = { .msg_iov = &one, .msg_iovlen = 1 };
	if (!strcmp(mode, "peek"))
		return recv(fd, buf, WANT, MSG_PEEK | MSG_WAITALL);
	if (!strcmp(mode, "peekmsg"))
		return recvmsg(fd, &m, MSG_PEEK | MSG_WAITALL);
	if (!strncmp(mode, "iov", 3)) {
		int n = atoi(mode + 3);
		for (int i = 0; i < n; i++)
			iov[i] = (struct iovec){ buf + (size_t)i * (WANT / 300), WANT / 300 };
		m.msg_iov = iov;
		m.msg_iovlen = (size_t)n;
		return recvmsg(fd, &m, MSG_WAITALL);
	}
	if (!strcmp(mode, "mmsg")) {
		struct mmsghdr v = { .msg_hdr = m };
		int r = recvmmsg(fd, &v, 1, MSG_WAITALL, NULL);
		return r == 1 ? (ssize_t)v.msg_len : r;
	}
	fprintf(stderr, "no mode %s\n", mode);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int port = atoi(argv[1]), n = atoi(argv[3]);
	static const char req[] = "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
		a.sin_addr.s_addr = htonl(0x7f000001);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			perror("connect");
			return 1;
		}
		if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
			perror("write");
			return 1;
		}
		ssize_t r = call(fd, argv[2]);
		printf("request %d: %s -> %s (%.12s)\n", i, argv[2], r > 0 ? "an answer" : r == 0 ? "EOF" : "error",
		       r > 0 ? buf : "");
		char rest[4096];
		while ((r = read(fd, rest, sizeof(rest))) > 0)
			;
		printf("request %d: then read %zd\n", i, r);
		close(fd);
	}
	return 0;
}

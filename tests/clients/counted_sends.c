/*
 * counted_sends.c - a request head written in two sends the kernel counts
 * one by one, on a socket that asked it to: "zerocopy" sets SO_ZEROCOPY
 * and sends with MSG_ZEROCOPY, then waits (as a zerocopy program must
 * before it reuses its buffers) until the completion of send 1 is
 * reported; "timestamp" sets SO_TIMESTAMPING (TX software, OPT_ID) and
 * waits for two TX timestamps, printing each one's key (OPT_ID: the
 * byte count of its send).  The waits are the kernel's error queue,
 * polled without a timeout.  Then the request's answer is read (to EOF:
 * it asks to close).  A library that held the first piece merged the two
 * sends: one completion, one timestamp, and the wait never ends
 * (docs/hold.md "Sends the kernel counts").
 *
 * From request FROM on (default 0); the ones before are plain requests
 * that ask to keep the connection, so that the next one may be handed a
 * pooled connection.
 *
 * usage: counted_sends port zerocopy|timestamp requests [from]
 */
#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif

/* the next report of the error queue: its extended error, or NULL */
static struct sock_extended_err *next_report(int fd, char *ctl, size_t cap, int *tstamp_seen)
{
	struct pollfd p = { .fd = fd };
	if (poll(&p, 1, -1) != 1)
		return NULL;
	struct msghdr mh = { .msg_control = ctl, .msg_controllen = cap };
	if (recvmsg(fd, &mh, MSG_ERRQUEUE) < 0)
		return NULL;
	struct sock_extended_err *ee = NULL;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPING)
			*tstamp_seen = 1;
		else if (cm->cmsg_level == SOL_IP || cm->cmsg_level == SOL_IPV6)
			ee = (struct sock_extended_err *)CMSG_DATA(cm);
	}
	return ee;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5)
		return 2;
	int port = atoi(argv[1]), n = atoi(argv[3]), from = argc > 4 ? atoi(argv[4]) : 0;
	int zerocopy = !strcmp(argv[2], "zerocopy");
	static const char a[] = "GET /f HTTP/1.1\r\nHost: x\r\n", b[] = "Connection: close\r\n\r\n";
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
		sa.sin_addr.s_addr = htonl(0x7f000001);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			perror("connect");
			return 1;
		}
		if (i < from) {
			static const char keep[] = "GET /f HTTP/1.1\r\nHost: x\r\n\r\n";
			char buf[4096];
			if (write(fd, keep, sizeof(keep) - 1) != (ssize_t)sizeof(keep) - 1 ||
			    read(fd, buf, sizeof(buf)) <= 0)
				return 4;
			printf("request %d: plain\n", i);
			close(fd);
			continue;
		}
		int one = 1, ts = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID |
				  SOF_TIMESTAMPING_OPT_TSONLY;
		if (zerocopy ? setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one))
			     : setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &ts, sizeof(ts))) {
			perror("setsockopt");
			return 1;
		}
		int flags = zerocopy ? MSG_ZEROCOPY : 0;
		ssize_t w1 = send(fd, a, sizeof(a) - 1, flags), w2 = send(fd, b, sizeof(b) - 1, flags);
		printf("request %d: sends %zd %zd\n", i, w1, w2);
		char ctl[512];
		if (zerocopy) {
			/* completions may be reported as ranges (ee_info..ee_data) */
			long high = -1;
			while (high < 1) {
				int seen = 0;
				struct sock_extended_err *ee = next_report(fd, ctl, sizeof(ctl), &seen);
				if (!ee)
					return 3;
				if ((long)ee->ee_data > high)
					high = (long)ee->ee_data;
			}
			printf("request %d: send 1 completed\n", i);
		} else {
			for (int k = 0; k < 2; k++) {
				int seen = 0;
				struct sock_extended_err *ee = next_report(fd, ctl, sizeof(ctl), &seen);
				if (!ee || !seen)
					return 3;
				printf("request %d: TX timestamp %d, key %u\n", i, k, ee->ee_data);
			}
		}
		char buf[4096];
		ssize_t r;
		long total = 0;
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			total += r;
		printf("request %d: %s, then read %zd\n", i, total ? "an answer" : "nothing", r);
		close(fd);
	}
	return 0;
}

/*
 * tcpinfo.c - the kernel's view of a TCP socket (replay.h): the count of
 * acknowledged bytes, the state, the smoothed RTT.  Apart
 * because glibc's struct tcp_info stops short of tcpi_bytes_acked and
 * <linux/tcp.h>, which has it, cannot share a file with <netinet/tcp.h>.
 */
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "real.h"
#include "replay.h"

int kp_tcp_quickack(int fd)
{
	int one = 1;
	return KP_REAL(setsockopt)(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

void kp_tcp_push(int fd)
{
	int saved = errno, one = 1, zero = 0;
	if (KP_REAL(setsockopt)(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0)
		KP_REAL(setsockopt)(fd, IPPROTO_TCP, TCP_NODELAY, &zero, sizeof(zero));
	errno = saved;
}

int kp_tcp_bytes_acked(int fd, uint64_t *acked)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	if (KP_REAL(getsockopt)(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -1;
	/* an older kernel fills less of it: no count (Linux < 4.2) */
	if (len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked)) {
		errno = ENOPROTOOPT;
		return -1;
	}
	*acked = ti.tcpi_bytes_acked;
	return 0;
}

int kp_tcp_view(int fd, struct kp_tcp_view *v)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	memset(&ti, 0, sizeof(ti));
	if (KP_REAL(getsockopt)(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -1;
	v->state = ti.tcpi_state;
	v->srtt_us = ti.tcpi_rtt;
	v->acked_ok = len >= offsetof(struct tcp_info, tcpi_bytes_received) +
				    sizeof(ti.tcpi_bytes_received);
	v->acked = v->acked_ok ? ti.tcpi_bytes_acked : 0;
	v->received = v->acked_ok ? ti.tcpi_bytes_received : 0;
	return 0;
}

int kp_tcp_kernel_tx(int fd, uint64_t *w)
{
	uint64_t acked;
	int outq;
	if (kp_tcp_bytes_acked(fd, &acked) < 0 || KP_REAL(ioctl)(fd, SIOCOUTQ, &outq) < 0 || outq < 0)
		return -1;
	*w = acked + (uint64_t)outq;
	return 0;
}

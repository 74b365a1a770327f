/*
 * tcpinfo.c - the kernel's count of acknowledged bytes (replay.h).  Apart
 * because glibc's struct tcp_info stops short of tcpi_bytes_acked and
 * <linux/tcp.h>, which has it, cannot share a file with <netinet/tcp.h>.
 */
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#include "real.h"
#include "replay.h"

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

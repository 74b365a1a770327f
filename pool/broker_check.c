/*
 * broker_check.c - the security checks of DESIGN 8, shared by the broker
 * (pool/broker.c) and the library (shim/broker_client.c).
 */
#include "broker_check.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *bk_check_conn(int fd, const struct pool_key *key, bk_getsockopt_fn gso)
{
	int v;
	socklen_t l = sizeof(v);
	if (gso(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0)
		return "not a socket";
	if (v != SOCK_STREAM)
		return "not a stream socket";
	l = sizeof(v);
	if (gso(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != key->family)
		return "socket family is not the key's";
	l = sizeof(v);
	if (gso(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) < 0 || v != IPPROTO_TCP)
		return "not TCP";
	l = sizeof(v);
	if (gso(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || v)
		return "a listening socket";
	struct tcp_info ti;
	l = sizeof(ti);
	if (gso(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0 || ti.tcpi_state != TCP_ESTABLISHED)
		return "not an established connection";
	struct sockaddr_storage ss;
	l = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &l) < 0)
		return "not connected";
	if (key->family == AF_INET) {
		const struct sockaddr_in *in = (const void *)&ss;
		if (ntohs(in->sin_port) != key->port || memcmp(&in->sin_addr, key->addr, 4))
			return "peer is not the key's destination";
	} else {
		const struct sockaddr_in6 *in6 = (const void *)&ss;
		if (ntohs(in6->sin6_port) != key->port || memcmp(&in6->sin6_addr, key->addr, 16) ||
		    in6->sin6_scope_id != key->scope)
			return "peer is not the key's destination";
	}
	return NULL;
}

const char *bk_check_dir(const char *sock_path)
{
	char dir[PATH_MAX];
	struct stat st;
	const char *slash = strrchr(sock_path, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == sock_path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - sock_path), sock_path);
	if (lstat(dir, &st) < 0)
		return errno == ENOENT ? "socket directory missing"
				       : "cannot reach the socket directory (another user's?)";
	if (S_ISLNK(st.st_mode))
		return "socket directory is a symlink";
	if (!S_ISDIR(st.st_mode))
		return "socket directory is not a directory";
	if (st.st_uid != geteuid())
		return "socket directory belongs to another user";
	if (st.st_mode & 077)
		return "socket directory is open to group or others (want mode 0700)";
	return NULL;
}

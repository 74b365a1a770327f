/*
 * broker_check.c - the security checks of docs/broker.md, shared by the
 * broker (pool/broker.c) and the library (shim/broker_client.c).  The calls
 * the library exports come in through struct bk_sys (see the header);
 * fstat, mkdirat and getsockname are not exported and are libc's.
 */
#include "broker_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int bk_ns_self(const struct bk_sys *sys, int sock, struct bk_ns *self)
{
	uint64_t c = 0;
	socklen_t l = sizeof(c);
	self->known = false;
	if (sys->getsockopt(sock, SOL_SOCKET, SO_NETNS_COOKIE, &c, &l) == 0 && l == sizeof(c) && c) {
		self->cookie = c;
		self->known = true;
		return 0;
	}
	/* ENOPROTOOPT: a kernel before 5.14; look sockets up in /proc */
	if (errno != ENOPROTOOPT && errno != EINVAL)
		return -1;
	self->cookie = 0;
	self->known = true;
	return 0;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

int bk_table_has_inode(const char *buf, size_t len, int family, uint64_t ino, size_t *partial)
{
	/* /proc/net/tcp{,6}: "sl local rem st tx:rx tr:when retrnsmt uid
	 * timeout inode ..."; /proc/net/unix: "Num RefCount Protocol Flags
	 * Type St Inode [Path]" */
	unsigned want = family == AF_UNIX ? 7 : 10;
	size_t i = 0;
	*partial = 0;
	while (i < len) {
		size_t start = i;
		while (i < len && buf[i] != '\n')
			i++;
		if (i == len) { /* no newline: to be completed by the next read */
			*partial = len - start;
			return 0;
		}
		size_t end = i++;
		unsigned field = 0;
		size_t j = start;
		while (j < end) {
			while (j < end && is_space(buf[j]))
				j++;
			if (j == end)
				break;
			field++;
			size_t f = j;
			while (j < end && !is_space(buf[j]))
				j++;
			if (field != want)
				continue;
			uint64_t v = 0;
			bool digits = j > f && j - f <= 19;
			for (size_t k = f; digits && k < j; k++) {
				if (buf[k] < '0' || buf[k] > '9')
					digits = false;
				else
					v = v * 10 + (uint64_t)(buf[k] - '0');
			}
			if (digits && v == ino)
				return 1;
			break;
		}
	}
	return 0;
}

/* Is socket inode ino listed in our own /proc/self/net/<table>?  The
 * tables list the sockets of the reader's network namespace only. */
static int in_table(const struct bk_sys *sys, const char *table, int family, uint64_t ino)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/net/%s", table);
	int fd = sys->openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[8192];
	size_t have = 0;
	int found = 0;
	for (;;) {
		ssize_t n = sys->read(fd, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			found = -1;
			break;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		size_t partial;
		if (bk_table_has_inode(buf, have, family, ino, &partial)) {
			found = 1;
			break;
		}
		if (partial == sizeof(buf)) { /* a line longer than the buffer */
			found = -1;
			break;
		}
		memmove(buf, buf + have - partial, partial);
		have = partial;
	}
	sys->close(fd);
	return found;
}

const char *bk_check_ns(const struct bk_sys *sys, int fd, int family, const struct bk_ns *self)
{
	if (!self->known)
		return "our own network namespace is unknown";
	if (self->cookie) {
		uint64_t c = 0;
		socklen_t l = sizeof(c);
		if (sys->getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &l) < 0 || l != sizeof(c))
			return "cannot tell the socket's network namespace";
		return c == self->cookie ? NULL : "socket of another network namespace";
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return "not a socket";
	int r = family == AF_UNIX ? in_table(sys, "unix", family, st.st_ino)
		: family == AF_INET ? in_table(sys, "tcp", family, st.st_ino)
				    : in_table(sys, "tcp6", family, st.st_ino);
	if (r < 0)
		return "cannot tell the socket's network namespace";
	return r ? NULL : "socket of another network namespace";
}

const char *bk_check_conn(const struct bk_sys *sys, int fd, const struct pool_key *key,
			  const struct bk_ns *self, bool *dead)
{
	socklen_t l;
	if (dead)
		*dead = false;
	/* TCP_INFO answers for TCP sockets only (a file or pipe: ENOTSOCK; a
	 * UDP, Unix or raw socket: ENOPROTOOPT or EOPNOTSUPP): one call for
	 * the type, the protocol and the state */
	struct tcp_info ti;
	l = sizeof(ti);
	if (sys->getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0)
		return errno == ENOTSOCK ? "not a socket" : "not TCP";
	if (ti.tcpi_state == TCP_LISTEN)
		return "a listening socket";
	/* the family and the destination, in one call */
	struct sockaddr_storage ss;
	l = sizeof(ss);
	memset(&ss, 0, sizeof(ss));
	if (sys->getpeername(fd, (struct sockaddr *)&ss, &l) == 0) {
		struct pool_key peer;
		if (!pool_key_from_sockaddr((struct sockaddr *)&ss, l, &peer) || peer.family != key->family)
			return "socket family is not the key's";
		/* (an IPv4 key's scope is 0, as pool_key_from_sockaddr makes it) */
		if (!pool_key_same_peer(&peer, key))
			return "peer is not the key's destination";
	} else if (ti.tcpi_state != TCP_CLOSE) {
		return "not connected";
	} else {
		/* closed: reset on its way here (its error still pending), or
		 * never connected at all (a lie) */
		int err = 0;
		l = sizeof(err);
		if (sys->getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 ||
		    (err != ECONNRESET && err != EPIPE && err != ETIMEDOUT))
			return "not connected";
		if (dead)
			*dead = true;
		return "not an established connection";
	}
	if (ti.tcpi_state != TCP_ESTABLISHED) {
		/* CLOSE_WAIT (the server closed it) and the like: it died on
		 * its way, whichever namespace it was in; it is dropped, unused */
		if (dead)
			*dead = true;
		return "not an established connection";
	}
	/* self NULL: our own socket, never left the process */
	return self ? bk_check_ns(sys, fd, key->family, self) : NULL;
}

const char *bk_check_proof(const struct bk_sys *sys, const struct ucred *link_cred, int proof,
			   const struct bk_ns *self)
{
	int v;
	socklen_t l = sizeof(v);
	if (sys->getsockopt(proof, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v)
		return "its proof is not a listening socket";
	const char *why = bk_check_ns(sys, proof, AF_UNIX, self);
	if (why)
		return "its listening socket is not in our network namespace";
	/* the listener's credentials are those of whoever called listen() on
	 * it, and a connected socket carries its listener's: the same pid and
	 * uid tie the proof to the broker this link reached (a TCP listener
	 * has none) */
	struct ucred a;
	l = sizeof(a);
	if (sys->getsockopt(proof, SOL_SOCKET, SO_PEERCRED, &a, &l) < 0)
		return "its proof has no credentials";
	if (a.pid != link_cred->pid || a.uid != link_cred->uid || !a.pid)
		return "its proof is not the listener we reached";
	return NULL;
}

const char *bk_check_parent(const struct bk_sys *sys, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
		return "parent is not a directory";
	if (st.st_uid != sys->euid && st.st_uid != 0)
		return "parent directory belongs to another user";
	/* another user could rename our directory away and put theirs (or a
	 * symlink) in its place: only a sticky directory forbids that */
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
		return "parent directory is writable by others and not sticky";
	return NULL;
}

const char *bk_base(const char *sock_path)
{
	const char *slash = strrchr(sock_path, '/');
	return slash ? slash + 1 : sock_path;
}

/* The reasons bk_open_dir gives for a directory that is not there or not
 * ours (bk_dir_not_ours), as opposed to one of ours that is not safe */
static const char why_missing[] = "socket directory missing";
static const char why_others[] = "socket directory belongs to another user";
static const char why_unreachable[] = "cannot reach the socket directory (another user's?)";

bool bk_dir_not_ours(const char *why)
{
	return why == why_missing || why == why_others || why == why_unreachable;
}

int bk_open_dir(const struct bk_sys *sys, const char *dir, unsigned flags, const char **why)
{
	*why = NULL;
	int fd = -1;
	if (flags & (BK_DIR_CREATE | BK_DIR_PARENT)) {
		char parent[PATH_MAX];
		const char *slash = strrchr(dir, '/');
		const char *name;
		if (!slash) {
			snprintf(parent, sizeof(parent), ".");
			name = dir;
		} else {
			size_t n = slash == dir ? 1 : (size_t)(slash - dir);
			if (n >= sizeof(parent)) {
				*why = "socket path too long";
				return -1;
			}
			memcpy(parent, dir, n);
			parent[n] = 0;
			name = slash + 1;
		}
		if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
			*why = "socket directory has no name of its own";
			return -1;
		}
		int pfd = sys->openat(AT_FDCWD, parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0) {
			*why = errno == ENOENT ? why_missing : "cannot open the socket directory's parent";
			return -1;
		}
		if ((*why = bk_check_parent(sys, pfd))) {
			sys->close(pfd);
			return -1;
		}
		if ((flags & BK_DIR_CREATE) && mkdirat(pfd, name, 0700) < 0 && errno != EEXIST) {
			*why = "cannot create the socket directory";
			sys->close(pfd);
			return -1;
		}
		fd = sys->openat(pfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int err = errno;
		sys->close(pfd);
		errno = err;
	} else {
		fd = sys->openat(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		*why = errno == ENOENT			 ? why_missing
		       : errno == ELOOP || errno == ENOTDIR ? "socket directory is a symlink or not a directory"
							   : why_unreachable;
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
		*why = "socket directory is not a directory";
	else if (st.st_uid != sys->euid)
		*why = why_others;
	else if (st.st_mode & 077)
		*why = "socket directory is open to group or others (want mode 0700)";
	if (*why) {
		sys->close(fd);
		return -1;
	}
	return fd;
}

int bk_open_sock_dir(const struct bk_sys *sys, const char *sock_path, unsigned flags, const char **why)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(sock_path, '/');
	if (!slash || slash == sock_path) {
		*why = "the socket's path must be absolute and not in /";
		return -1;
	}
	if ((size_t)(slash - sock_path) >= sizeof(dir)) {
		*why = "socket path too long";
		return -1;
	}
	memcpy(dir, sock_path, (size_t)(slash - sock_path));
	dir[slash - sock_path] = 0;
	return bk_open_dir(sys, dir, flags, why);
}

int bk_fd_path(char *out, size_t cap, int dirfd, const char *name)
{
	int n = snprintf(out, cap, "/proc/self/fd/%d/%s", dirfd, name);
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

char bk_stat_state(const char *buf, size_t len)
{
	const char *close = NULL;
	for (size_t i = 0; i < len; i++)
		if (buf[i] == ')')
			close = buf + i;
	if (!close || close + 2 >= buf + len || close[1] != ' ')
		return 0;
	return close[2];
}

bool bk_pid_stopped(const struct bk_sys *sys, pid_t pid)
{
	if (pid <= 0)
		return false;
	char path[32], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = sys->openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = sys->read(fd, buf, sizeof(buf));
	sys->close(fd);
	if (n <= 0)
		return false;
	/* 'T' only: a traced broker ('t') stops at each of its system calls
	 * under strace, for a moment, and answers (strace -f of a command
	 * under keepalive traces its broker too) */
	return bk_stat_state(buf, (size_t)n) == 'T';
}

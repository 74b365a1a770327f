/*
 * select_garbage.c - select(getdtablesize(), ...) on stdin over an
 * ordinary fd_set followed by nonzero bytes, after N requests: alone the
 * kernel reads the set only up to its fd table's size (docs/limits.md
 * "select past FD_SETSIZE"), so the bytes past it are never looked at.
 *
 * Usage: select_garbage PORT PATH N [pselect] </dev/null
 *
 * N requests to 127.0.0.1:PORT, each on a new socket: GET PATH with
 * "Connection: close", read to EOF, closed (the bytes read are printed).
 * Then one select (pselect with "pselect") on fd 0 with a zero timeout,
 * the fd_set followed by 1024 bytes of 0xAB; it prints its result, errno
 * and how many of those bytes changed.  Run it with a soft RLIMIT_NOFILE
 * above FD_SETSIZE.
 */
#include "common.h"

#include <stdbool.h>
#include <sys/select.h>

static struct {
	fd_set rd;
	unsigned char guard[1024];
} st;

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5)
		die("usage: select_garbage PORT PATH N [pselect]");
	int port = atoi(argv[1]), n = atoi(argv[3]);
	bool use_pselect = argc == 5 && strcmp(argv[4], "pselect") == 0;
	int nfds = getdtablesize();
	printf("nfds above FD_SETSIZE: %s\n", nfds > FD_SETSIZE ? "yes" : "no");
	for (int i = 0; i < n; i++) {
		int s = send_get_close(port, argv[2]);
		copy_response(s);
		close(s);
	}
	fflush(stdout);
	memset(st.guard, 0xAB, sizeof(st.guard));
	FD_ZERO(&st.rd);
	FD_SET(0, &st.rd);
	struct timeval tv = { 0, 0 };
	struct timespec ts = { 0, 0 };
	errno = 0;
	int r = use_pselect ? pselect(nfds, &st.rd, NULL, NULL, &ts, NULL) : select(nfds, &st.rd, NULL, NULL, &tv);
	int err = errno;
	int changed = 0;
	for (size_t i = 0; i < sizeof(st.guard); i++)
		changed += st.guard[i] != 0xAB;
	printf("%s: %d errno=%s fd 0 set=%d bytes past the set changed=%d\n", use_pselect ? "pselect" : "select",
	       r, r < 0 ? strerror(err) : "-", FD_ISSET(0, &st.rd) ? 1 : 0, changed);
	return fflush(stdout) == 0 ? 0 : 1;
}

/*
 * select_wide.c - select(getdtablesize(), ...) over an ordinary fd_set,
 * the classic idiom: alone the kernel reads and writes the set only up to
 * its fd table's size (docs/limits.md "select past FD_SETSIZE").
 *
 * Usage: select_wide PORT PATH N [pselect]
 *
 * N requests to 127.0.0.1:PORT, each on a new socket: GET PATH with
 * "Connection: close", then select(getdtablesize(), rd, ...) (pselect
 * with "pselect") before each read, until EOF; the bytes read are printed.  The fd_set sits at the end
 * of a page whose next page is PROT_NONE: a read or write past it by
 * anyone (the library's scans, or the kernel's, whose table hidden fds of
 * the library grew) faults.  Run it with a soft RLIMIT_NOFILE above
 * FD_SETSIZE.
 */
#include "common.h"

#include <stdbool.h>
#include <sys/mman.h>
#include <sys/select.h>

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5)
		die("usage: select_wide PORT PATH N [pselect]");
	int port = atoi(argv[1]), n = atoi(argv[3]);
	bool use_pselect = argc == 5 && strcmp(argv[4], "pselect") == 0;
	char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || mprotect(page + 4096, 4096, PROT_NONE))
		die("mmap");
	fd_set *rd = (fd_set *)(page + 4096 - sizeof(fd_set));
	int nfds = getdtablesize();
	printf("nfds above FD_SETSIZE: %s\n", nfds > FD_SETSIZE ? "yes" : "no");
	for (int i = 0; i < n; i++) {
		int s = send_get_close(port, argv[2]);
		for (;;) {
			FD_ZERO(rd);
			FD_SET(s, rd);
			struct timeval tv = { 10, 0 };
			struct timespec ts = { 10, 0 };
			int r = use_pselect ? pselect(nfds, rd, NULL, NULL, &ts, NULL)
					    : select(nfds, rd, NULL, NULL, &tv);
			if (r <= 0)
				die("%s: %d", use_pselect ? "pselect" : "select", r);
			char buf[4096];
			ssize_t k = read(s, buf, sizeof(buf));
			if (k < 0)
				die("read");
			if (!k)
				break;
			write_stdout(buf, (size_t)k);
		}
		close(s);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

/*
 * stdio_http.c - requests written through stdio on an fdopen'd socket
 * (glibc writes a FILE's buffer with its internal write, which no preload
 * sees; hooks_stdio.c routes it through the shim).  Responses are read
 * with read() until EOF and copied to stdout.
 *
 *   stdio_http big PORT N     N times: fdopen(s, "w"), one fprintf of an
 *                             HTTP/1.0 GET /f whose head (an X-Pad header)
 *                             is bigger than the FILE's buffer, fflush,
 *                             the response, fclose
 *   stdio_http behind PORT    a GET /f as above (HTTP/1.0, read to EOF),
 *                             then, through a second FILE on a dup of the
 *                             socket, wide-character stdio (fwprintf:
 *                             nothing of ours sees it) writes half of a
 *                             second request head; fclose both; then a
 *                             GET /f on a new socket with write()
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <wchar.h>

#include "common.h"

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s big|behind PORT [N]\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int port = atoi(argv[2]);
	if (!strcmp(argv[1], "big")) {
		long n = argc > 3 ? atol(argv[3]) : 1;
		static char pad[6001];
		memset(pad, 'p', sizeof(pad) - 1);
		for (long i = 0; i < n; i++) {
			int s = dial_loopback(port);
			FILE *f = fdopen(s, "w");
			if (!f)
				die("fdopen");
			if (fprintf(f, "GET /f HTTP/1.0\r\nHost: 127.0.0.1\r\nX-Pad: %s\r\n\r\n", pad) < 0 ||
			    fflush(f) != 0)
				die("fprintf");
			copy_response(s);
			fclose(f);
		}
	} else if (!strcmp(argv[1], "behind")) {
		int s = dial_loopback(port);
		FILE *f = fdopen(s, "w");
		if (!f)
			die("fdopen");
		fprintf(f, "GET /f HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
		if (fflush(f) != 0)
			die("fflush");
		copy_response(s);
		FILE *g = fdopen(dup(s), "w");
		if (!g)
			die("fdopen");
		fwide(g, 1);
		fwprintf(g, L"GET /f?behind HTTP/1.1\r\nHost: 127.0.0.1\r\n");
		fflush(g);
		fclose(g);
		fclose(f);
		s = dial_loopback(port);
		const char *req = "GET /f HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
		if (write(s, req, strlen(req)) != (ssize_t)strlen(req))
			die("write");
		copy_response(s);
		close(s);
	} else {
		die("unknown mode %s", argv[1]);
	}
	return 0;
}

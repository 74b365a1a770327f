/*
 * stdio_hold.c - one GET /f (HTTP/1.1, Connection: close) written with
 * fprintf + fflush on fdopen(s, "w"), then the response read some way
 * (read until EOF, copied to stdout).  The shim holds a head written
 * through stdio until the program's next call (conn.h): each MODE is a
 * program whose next call is not a plain read on the socket.
 *
 *   stdio_hold MODE PORT LOG
 *     stdin     the socket dup2'd onto fd 0 first; the response read with
 *               fgets(stdin) (libc's internal read, unseen by the shim)
 *     fionread  ioctl(FIONREAD) polled (5 s at most) until bytes wait
 *     waitpid   a child forked before the connection waits (5 s at most)
 *               until the server's access log LOG is not empty; the
 *               parent waitpid()s for it, then reads
 *     pipe      the same child writes a byte on a pipe instead; the
 *               parent read()s the pipe, then the socket
 *     syscall   syscall(SYS_read) on the socket (past the read wrapper)
 *     sleep     sleep(1), then read
 *     _exit     no response: _exit(0) (a request sent and forgotten)
 *     order     a GET /empty on a second connection (write, its
 *               response read to EOF), then the first one's response
 *     rafter    fread on fdopen(dup(s), "r") made after the write
 *     recv      recv() on the socket
 *     fdopen_first  fdopen(s, "r+") made before connect(); the request
 *               written and the response read (fgets) through that FILE
 *               (libc's internal read, unseen by the shim)
 *     stdin_later   the request printed on stdout (the socket dup2'd onto
 *               fd 1, then stdout put back), then the socket dup2'd onto
 *               fd 0 and the response read with fread(stdin)
 *     accept    a child forked before the connection connects back to a
 *               listening socket of ours once the server's access log LOG
 *               is not empty (5 s at most); the parent accept()s it, then
 *               reads the response
 * Exit 4: FIONREAD never saw the response; 5: the server never saw the
 * request (the child's wait timed out).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common.h"

/* the child: 0 once LOG is not empty, 5 after 5 s */
static int log_seen(const char *log)
{
	struct stat st;
	for (int i = 0; i < 50; i++) {
		if (stat(log, &st) == 0 && st.st_size > 0)
			return 0;
		usleep(100000);
	}
	return 5;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s MODE PORT LOG\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	const char *mode = argv[1], *log = argv[3];
	int port = atoi(argv[2]);
	pid_t kid = -1;
	int p[2] = { -1, -1 };
	if (!strcmp(mode, "waitpid") || !strcmp(mode, "pipe")) {
		if (pipe(p) < 0 || (kid = fork()) < 0)
			die("fork");
		if (kid == 0) {
			int r = log_seen(log);
			if (r == 0 && write(p[1], "x", 1) < 0)
				r = 1;
			_exit(r);
		}
		close(p[1]);
	}
	int lsn = -1;
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (!strcmp(mode, "accept")) {
		socklen_t ll = sizeof(la);
		lsn = socket(AF_INET, SOCK_STREAM, 0);
		if (lsn < 0 || bind(lsn, (struct sockaddr *)&la, sizeof(la)) < 0 || listen(lsn, 1) < 0 ||
		    getsockname(lsn, (struct sockaddr *)&la, &ll) < 0)
			die("listen");
		if ((kid = fork()) < 0)
			die("fork");
		if (kid == 0) {
			/* the peer calls back once the server has the request */
			int r = log_seen(log);
			int c = socket(AF_INET, SOCK_STREAM, 0);
			if (c < 0 || connect(c, (struct sockaddr *)&la, sizeof(la)) < 0)
				r = 1;
			_exit(r);
		}
	}
	char buf[4096];
	ssize_t n;
	if (!strcmp(mode, "fdopen_first")) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		FILE *f = s < 0 ? NULL : fdopen(s, "r+");
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (!f || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			die("connect");
		if (fprintf(f, "GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n") < 0 ||
		    fflush(f) != 0)
			die("fprintf");
		while (fgets(buf, sizeof(buf), f))
			write_stdout(buf, strlen(buf));
		fclose(f);
		return 0;
	}
	int s = dial_loopback(port);
	if (!strcmp(mode, "stdin") && dup2(s, 0) < 0)
		die("dup2");
	if (!strcmp(mode, "stdin_later")) {
		int out = dup(1);
		if (out < 0 || dup2(s, 1) < 0)
			die("dup2");
		if (printf("GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n") < 0 ||
		    fflush(stdout) != 0)
			die("printf");
		if (dup2(out, 1) < 0 || dup2(s, 0) < 0)
			die("dup2");
		close(out);
		while ((n = (ssize_t)fread(buf, 1, sizeof(buf), stdin)) > 0)
			write_stdout(buf, (size_t)n);
		return 0;
	}
	FILE *f = fdopen(s, "w");
	if (!f)
		die("fdopen");
	if (fprintf(f, "GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n") < 0 ||
	    fflush(f) != 0)
		die("fprintf");
	if (!strcmp(mode, "accept")) {
		int st, c = accept(lsn, NULL, NULL);
		if (c < 0)
			die("accept");
		close(c);
		if (waitpid(kid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "the server never saw the request\n");
			return 5;
		}
		kid = -1;
		copy_response(s);
	} else if (!strcmp(mode, "order")) {
		/* the first request is GET /f, written through stdio; then a
		 * whole exchange on a second connection (write, read to EOF) */
		int s2 = dial_loopback(port);
		const char *q = "GET /empty HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
		if (write(s2, q, strlen(q)) != (ssize_t)strlen(q))
			die("write");
		copy_response(s2);
		close(s2);
		copy_response(s);
	} else if (!strcmp(mode, "stdin")) {
		while (fgets(buf, sizeof(buf), stdin))
			write_stdout(buf, strlen(buf));
	} else if (!strcmp(mode, "fionread")) {
		int k = 0;
		for (int i = 0; i < 50 && !k; i++)
			if (ioctl(s, FIONREAD, &k) < 0 || !k)
				usleep(100000);
		if (!k) {
			fprintf(stderr, "FIONREAD never saw the response\n");
			return 4;
		}
		copy_response(s);
	} else if (!strcmp(mode, "waitpid")) {
		int st;
		if (waitpid(kid, &st, 0) < 0)
			die("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "the server never saw the request\n");
			return 5;
		}
		copy_response(s);
	} else if (!strcmp(mode, "pipe")) {
		char c;
		if (read(p[0], &c, 1) != 1) {
			fprintf(stderr, "the server never saw the request\n");
			return 5;
		}
		copy_response(s);
	} else if (!strcmp(mode, "syscall")) {
		while ((n = syscall(SYS_read, s, buf, sizeof(buf))) > 0)
			write_stdout(buf, (size_t)n);
	} else if (!strcmp(mode, "sleep")) {
		sleep(1);
		copy_response(s);
	} else if (!strcmp(mode, "_exit")) {
		_exit(0);
	} else if (!strcmp(mode, "rafter")) {
		FILE *r = fdopen(dup(s), "r");
		if (!r)
			die("fdopen");
		while ((n = (ssize_t)fread(buf, 1, sizeof(buf), r)) > 0)
			write_stdout(buf, (size_t)n);
	} else if (!strcmp(mode, "recv")) {
		while ((n = recv(s, buf, sizeof(buf), 0)) > 0)
			write_stdout(buf, (size_t)n);
	} else {
		return 2;
	}
	if (kid > 0)
		waitpid(kid, NULL, 0);
	return 0;
}

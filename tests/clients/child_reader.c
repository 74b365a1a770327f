/*
 * child_reader.c - a program that sends one request and lets a child
 * process read the response: fork, dup2 the socket onto the child's stdin,
 * exec CMD (sed, wc...).  The parent closes its copy and waits.
 *
 * Usage: child_reader [--no-fork] host port path 1.0|1.1 CMD [ARG...]
 *   1.1: "GET path HTTP/1.1" with "Connection: close"; 1.0: "GET path
 *   HTTP/1.0" without a Connection header.  Exit status: the child's.
 *   --no-fork: the program itself moves the socket onto its stdin and
 *   execs CMD (the shell's `exec sed <&3`).
 *   --child-reads: the forked child reads the socket itself, by number,
 *   to EOF, and copies it to stdout (no dup2, no exec; CMD unused): the
 *   parent closes its copy and waits (docs/hold.md "A child that reads
 *   an inherited socket").  --child-polls: as --child-reads, each read
 *   after a poll() for POLLIN on the socket.
 */
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV },
			*ai;
	char req[1024];
	int len, s, st;
	pid_t pid;

	bool no_fork = argc > 1 && !strcmp(argv[1], "--no-fork");
	bool child_polls = argc > 1 && !strcmp(argv[1], "--child-polls");
	bool child_reads = child_polls || (argc > 1 && !strcmp(argv[1], "--child-reads"));
	if (no_fork || child_reads) {
		argv++;
		argc--;
	}
	if (argc < 6) {
		fprintf(stderr, "usage: %s host port path 1.0|1.1 CMD [ARG...]\n", argv[0]);
		return 2;
	}
	if (getaddrinfo(argv[1], argv[2], &hints, &ai) != 0)
		return 2;
	if (!strcmp(argv[4], "1.0"))
		len = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", argv[3], argv[1]);
	else
		len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
			       argv[3], argv[1]);
	s = socket(ai->ai_family, SOCK_STREAM, 0);
	if (s < 0 || connect(s, ai->ai_addr, ai->ai_addrlen) < 0 || write(s, req, (size_t)len) != len) {
		perror("request");
		return 1;
	}
	pid = no_fork ? 0 : fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0 && child_reads) {
		char buf[4096];
		ssize_t n = -1;
		struct pollfd p = { .fd = s, .events = POLLIN };
		while ((!child_polls || poll(&p, 1, -1) == 1) && (n = read(s, buf, sizeof(buf))) > 0)
			if (write(1, buf, (size_t)n) != n)
				_exit(1);
		_exit(n == 0 ? 0 : 1);
	}
	if (pid == 0) {
		if (dup2(s, 0) < 0) {
			perror("dup2");
			_exit(1);
		}
		close(s);
		execvp(argv[5], argv + 5);
		perror("exec");
		_exit(127);
	}
	close(s);
	if (waitpid(pid, &st, 0) < 0)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

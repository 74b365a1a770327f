/*
 * fork_write.c - a child writing on a connection inherited after its
 * parent's request asked to close (docs/hold.md "A child that writes on
 * an inherited connection").
 *
 *   fork_write HOST PORT early|late|after|exec-early|exec-late
 *
 * The parent writes GET /a with Connection: close and forks.  early: the
 * child writes a POST /pay at once, then the parent reads the connection
 * to its end.  late: the parent reads to the end first, then the child
 * writes one byte.  exec-: the child execs this program again (`fork_write
 * child early|late S GO TOLD`, the fds inherited by number), whose new
 * image writes as the child would.  after: the parent reads to the end,
 * then forks, and the child writes one byte.  Prints what the child's write
 * returned (or the signal that ended the child) and what the parent read:
 * its status lines (not its bytes: the Connection header's value may
 * differ).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* the child's part, in the forked child or in the image it execs */
static void child(int s, int go, int told, bool late)
{
	char c;
	if (late && read(go, &c, 1) != 1)
		_exit(3);
	const char *post = late ? "X" : "POST /pay HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
	ssize_t r = write(s, post, strlen(post));
	char line[64];
	int n = snprintf(line, sizeof(line), "child write %zd%s\n", r, r < 0 ? (errno == EPIPE ? " EPIPE" : " error") : "");
	if (write(told, line, (size_t)n) != n)
		_exit(4);
	_exit(0);
}

/* the parent's read of the connection to its end: its status lines */
static void read_to_end(int s)
{
	static char buf[65536];
	size_t total = 0;
	int statuses = 0;
	ssize_t n;
	while ((n = read(s, buf + total, sizeof(buf) - 1 - total)) > 0)
		total += (size_t)n;
	buf[total] = 0;
	for (char *p = buf; (p = strstr(p, "HTTP/1.1 ")); p++)
		statuses++;
	printf("parent read %d status lines, then %zd\n", statuses, n);
}

/* the child's end: the signal that killed it, or what it said */
static void child_told(pid_t pid, int told)
{
	int st;
	char line[64];
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st))
		printf("child killed by signal %d\n", WTERMSIG(st));
	ssize_t k = read(told, line, sizeof(line) - 1);
	if (WIFEXITED(st) && k > 0)
		fwrite(line, 1, (size_t)k, stdout);
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "child"))
		child(atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), !strcmp(argv[2], "late"));
	if (argc != 4)
		return 2;
	bool late = !strcmp(argv[3], "late") || !strcmp(argv[3], "exec-late");
	bool exec = !strncmp(argv[3], "exec-", 5);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		return perror("connect"), 1;
	const char *get = "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	if (write(s, get, strlen(get)) != (ssize_t)strlen(get))
		return perror("write"), 1;
	int go[2], told[2];
	if (pipe(go) < 0 || pipe(told) < 0)
		return 1;
	bool after = !strcmp(argv[3], "after");
	if (after) /* the end read before the fork */
		read_to_end(s);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (exec) {
			char fds[3][16];
			snprintf(fds[0], sizeof(fds[0]), "%d", s);
			snprintf(fds[1], sizeof(fds[1]), "%d", go[0]);
			snprintf(fds[2], sizeof(fds[2]), "%d", told[1]);
			execl("/proc/self/exe", argv[0], "child", late ? "late" : "early", fds[0], fds[1], fds[2], (char *)NULL);
			_exit(5);
		}
		child(s, go[0], told[1], late || after);
	}
	close(told[1]); /* (a child killed before it told: EOF, not a wait) */
	close(go[0]);
	if (!late && !after) { /* the child's write first */
		char line[64];
		ssize_t k = read(told[0], line, sizeof(line) - 1);
		if (k > 0)
			fwrite(line, 1, (size_t)k, stdout);
	}
	if (!after)
		read_to_end(s);
	if (late || after) {
		char c = 1;
		if (write(go[1], &c, 1) != 1)
			return 1;
		child_told(pid, told[0]);
	} else {
		int st;
		waitpid(pid, &st, 0);
	}
	return 0;
}

/*
 * fork_cue.c - a request that asked the server to close ("Connection:
 * close"), then, while the server works on it, the program starts another
 * process; then it reads the answer to EOF and prints what it read.
 *
 *   fork_cue HOST PORT PATH DIR MODE
 *
 * The server is nginx's /cue/ location (tests/servers/cue.py behind it):
 * the client waits on the fifo DIR/got until the request has crossed
 * nginx, runs MODE, then cues the upstream's answer on DIR/cue.  MODE:
 *   fork         fork(); the child _exits
 *   forkexec     fork(); the child execs /bin/true
 *   system       system("true")
 *   vfork-close  vfork(); the child closes the socket and execs /bin/true
 *   vfork-dup    vfork(); the child dups the socket, closes both, execs

 *   none         nothing
 * Each step waits for an event (fifos, waitpid), never for a time.
 */

#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void fifo_line(const char *dir, const char *name, int flags)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int f = open(path, flags);
	if (f < 0) {
		perror(path);
		exit(1);
	}
	char line[16];
	if (flags == O_RDONLY ? read(f, line, sizeof(line)) <= 0 : write(f, "go\n", 3) != 3) {
		perror(path);
		exit(1);
	}
	close(f);
}

static int wait_child(pid_t pid)
{
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		perror("fork");
		exit(1);
	}
	return st;
}

static void run_mode(const char *mode, int s)
{
	pid_t pid;
	if (!strcmp(mode, "fork")) {
		if ((pid = fork()) == 0)
			_exit(0);
		wait_child(pid);
	} else if (!strcmp(mode, "forkexec")) {
		if ((pid = fork()) == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		wait_child(pid);
	} else if (!strcmp(mode, "system")) {
		if (system("true") != 0)
			exit(1);
	} else if (!strncmp(mode, "vfork-", 6)) {
		if ((pid = vfork()) == 0) {
			if (!strcmp(mode, "vfork-close")) {
				close(s);
			} else if (!strcmp(mode, "vfork-dup")) {
				int d = dup(s);
				close(s);
				close(d);
			}
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		wait_child(pid);
	} else if (strcmp(mode, "none")) {
		fprintf(stderr, "unknown mode %s\n", mode);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV },
			*ai;
	if (argc != 6) {
		fprintf(stderr, "usage: %s HOST PORT PATH DIR MODE\n", argv[0]);
		return 2;
	}
	if (getaddrinfo(argv[1], argv[2], &hints, &ai) != 0)
		return 2;
	char req[1024];
	int len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
			   argv[3], argv[1]);
	int s = socket(ai->ai_family, SOCK_STREAM, 0);
	if (s < 0 || connect(s, ai->ai_addr, ai->ai_addrlen) < 0 || write(s, req, (size_t)len) != len) {
		perror("request");
		return 1;
	}
	fifo_line(argv[4], "got", O_RDONLY);
	run_mode(argv[5], s);
	fifo_line(argv[4], "cue", O_WRONLY);
	char buf[65536];
	size_t total = 0;
	ssize_t n;
	while (total < sizeof(buf) && (n = read(s, buf + total, sizeof(buf) - total)) > 0)
		total += (size_t)n;
	/* the status line and the body (the headers carry dates, and the
	 * hop-by-hop Connection header may differ) */
	char *eol = memchr(buf, '\r', total);
	char *body = memmem(buf, total, "\r\n\r\n", 4);
	printf("%s: status: %.*s; body: %.*s", argv[5],
	       eol ? (int)(eol - buf) : 0, buf, body ? (int)(buf + total - body - 4) : 0,
	       body ? body + 4 : "");
	printf("\n");
	return close(s) == 0 ? 0 : 1;
}

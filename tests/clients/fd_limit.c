/*
 * fd_limit.c - the program's RLIMIT_NOFILE is its own (docs/limits.md).
 *
 * Usage: fd_limit host port soft conns rounds calls
 *   Lowers its soft RLIMIT_NOFILE to `soft` (the hard limit kept), makes
 *   `rounds` rounds of `conns` concurrent GETs of /f (each to EOF, then
 *   closed: the library pools them), then fills its fd table with calls
 *   that make fds, in turn, the comma-separated `calls` (mkstemp, signalfd,
 *   inotify_init, eventfd, memfd_create, scm_rights: an fd received over
 *   SCM_RIGHTS, tmpfile, openat2 by syscall(), pipe, dup, socket,
 *   timerfd_create), until the first fails.
 *   Prints the responses, the fds made, which call failed and how (errno,
 *   or "ctrunc": the kernel dropped the received fd), the highest fd
 *   number it got, its own getrlimit, and the limit a child sees through
 *   fork+exec, posix_spawn, system() and popen().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <linux/openat2.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_FDS 70000

static int made[MAX_FDS];
static int n_made;
static int highest = -1;

static void keep(int fd)
{
	made[n_made++] = fd;
	if (fd > highest)
		highest = fd;
}

static int get_round(const char *host, int port, int conns)
{
	int s[64], ok = 0;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	inet_pton(AF_INET, host, &sa.sin_addr);
	for (int i = 0; i < conns; i++) {
		s[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (s[i] < 0 || connect(s[i], (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			perror("connect");
			exit(1);
		}
		if (s[i] > highest)
			highest = s[i];
		char req[256];
		int n = snprintf(req, sizeof(req),
				 "GET /f HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n", host, port);
		if (write(s[i], req, (size_t)n) != n) {
			perror("write");
			exit(1);
		}
	}
	for (int i = 0; i < conns; i++) {
		char buf[4096], first[12] = "";
		ssize_t n, total = 0;
		while ((n = read(s[i], buf, sizeof(buf))) > 0) {
			if (!total)
				memcpy(first, buf, n < 12 ? (size_t)n : 12);
			total += n;
		}
		if (n == 0 && !memcmp(first, "HTTP/1.1 200", 12))
			ok++;
		close(s[i]);
	}
	return ok;
}

/* the limit a shell started now reports */
static const char *child_cmd = "echo \"$0: $(ulimit -Sn) $(ulimit -Hn)\"";

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: %s host port soft conns rounds calls\n", argv[0]);
		return 2;
	}
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = strtoul(argv[3], NULL, 10);
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		perror("setrlimit");
		return 1;
	}
	int conns = atoi(argv[4]), rounds = atoi(argv[5]), ok = 0;
	for (int r = 0; r < rounds; r++)
		ok += get_round(argv[1], atoi(argv[2]), conns);
	printf("responses=%d\n", ok);
	struct rlimit now;
	getrlimit(RLIMIT_NOFILE, &now);
	printf("getrlimit: %llu %llu\n", (unsigned long long)now.rlim_cur,
	       (unsigned long long)now.rlim_max);
	fflush(stdout);

	/* what children see, before the table is full */
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "fork+exec", "-c", child_cmd, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, NULL, 0);
	char *sargv[] = { "posix_spawn", "-c", (char *)child_cmd, NULL };
	if (posix_spawn(&pid, "/bin/sh", NULL, NULL, sargv, environ) == 0)
		waitpid(pid, NULL, 0);
	system("echo \"system: $(ulimit -Sn) $(ulimit -Hn)\"");
	FILE *p = popen("echo \"popen: $(ulimit -Sn) $(ulimit -Hn)\"", "r");
	char line[128];
	while (p && fgets(line, sizeof(line), p))
		fputs(line, stdout);
	if (p)
		pclose(p);
	fflush(stdout);

	int sp[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sp) < 0) {
		perror("socketpair");
		return 1;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	const char *names[] = { "mkstemp", "signalfd", "inotify_init", "eventfd", "memfd_create", "scm_rights",
				"tmpfile", "openat2", "pipe", "dup", "socket", "timerfd_create" };
	enum { N_CALLS = 12 };
	const char *failed = NULL, *how = NULL;
	int order[16], n_order = 0;
	for (char *t = strtok(argv[6], ","); t && n_order < 16; t = strtok(NULL, ","))
		for (int k = 0; k < N_CALLS; k++)
			if (!strcmp(t, names[k]))
				order[n_order++] = k;
	if (!n_order) {
		fprintf(stderr, "no known call in %s\n", argv[6]);
		return 2;
	}
	for (unsigned i = 0; !failed && n_made < MAX_FDS; i++) {
		int k = order[i % (unsigned)n_order], fd = -1;
		char tmpl[] = "/tmp/fd_limit.XXXXXX";
		errno = 0;
		switch (k) {
		case 0:
			fd = mkstemp(tmpl);
			if (fd >= 0)
				unlink(tmpl);
			break;
		case 1:
			fd = signalfd(-1, &set, 0);
			break;
		case 2:
			fd = inotify_init();
			break;
		case 3:
			fd = eventfd(0, 0);
			break;
		case 4:
			fd = memfd_create("fd_limit", 0);
			break;
		case 6: {
			FILE *f = tmpfile(); /* libc's inner open: never seen */
			fd = f ? fileno(f) : -1;
			break;
		}
		case 7: {
			struct open_how how2 = { .flags = O_RDONLY | O_CLOEXEC };
			fd = (int)syscall(SYS_openat2, AT_FDCWD, "/dev/null", &how2, sizeof(how2));
			break;
		}
		case 8: {
			int pfd[2];
			if (pipe(pfd) == 0) {
				keep(pfd[0]);
				fd = pfd[1];
			}
			break;
		}
		case 9:
			fd = dup(0);
			break;
		case 10:
			fd = socket(AF_INET, SOCK_STREAM, 0);
			break;
		case 11:
			fd = timerfd_create(CLOCK_MONOTONIC, 0);
			break;
		case 5: {
			char b = 'x';
			union {
				struct cmsghdr h;
				char buf[CMSG_SPACE(sizeof(int))];
			} u;
			struct iovec iov = { &b, 1 };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
					     .msg_controllen = sizeof(u.buf) };
			struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &sp[0], sizeof(int));
			if (sendmsg(sp[0], &mh, 0) != 1) {
				perror("sendmsg");
				return 1;
			}
			memset(u.buf, 0, sizeof(u.buf));
			mh.msg_controllen = sizeof(u.buf);
			if (recvmsg(sp[1], &mh, 0) != 1) {
				fd = -1;
			} else if (mh.msg_flags & MSG_CTRUNC) {
				how = "ctrunc";
				fd = -1;
			} else {
				cm = CMSG_FIRSTHDR(&mh);
				memcpy(&fd, CMSG_DATA(cm), sizeof(int));
			}
			break;
		}
		}
		if (fd < 0) {
			failed = names[k];
			if (!how)
				how = strerror(errno);
		} else {
			keep(fd);
		}
	}
	printf("fds=%d failed=%s error=%s highest=%d\n", n_made, failed ? failed : "none",
	       how ? how : "-", highest);
	for (int i = 0; i < n_made; i++)
		close(made[i]);
	return 0;
}

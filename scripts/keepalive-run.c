/*
 * keepalive-run - the wrapper's two C steps (docs/wrapper.md); the wrapper
 * never stays between the command and its caller:
 *   keepalive-run --exec [--preload P] [--audit A] -- CMD [ARGS...]
 *     the last step: execs CMD (same pid: the caller's signals, status,
 *     process group and terminal are CMD's own) with the caller's
 *     environment as the entry point saved it (KEEPALIVE_ENV_FD), minus
 *     its LD_PRELOAD and KEEPALIVE_* variables, plus the ones the shell
 *     part holds now, LD_PRELOAD=P and LD_AUDIT=A (when given);
 *   keepalive-run --watch PID [--stats F] [--dir D]
 *     returns once it watches PID (the wrapper's, CMD's after the exec),
 *     leaving a process in a session of its own that, when PID ends,
 *     prints the summed KEEPALIVE_STATS line of F to the inherited stderr
 *     and removes the directory D.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

/* KEEPALIVE_STATS: each process appended one "libkeepalive: k=v ..."
 * line; print their sum (keys in first-seen order, version last) and how
 * many processes did anything. */
#define MAX_KEYS 64
static void print_stats(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	static char keys[MAX_KEYS][48], version[64];
	static unsigned long long sums[MAX_KEYS];
	int nkeys = 0;
	unsigned long procs = 0;
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok = strtok_r(line, " \n", &save);
		int any = 0;
		if (!tok)
			continue;
		while ((tok = strtok_r(NULL, " \n", &save))) {
			char *eq = strchr(tok, '=');
			if (!eq || eq == tok || (size_t)(eq - tok) >= sizeof(keys[0]))
				continue;
			*eq = 0;
			if (!strcmp(tok, "version")) {
				snprintf(version, sizeof(version), "%s", eq + 1);
				continue;
			}
			unsigned long long v = strtoull(eq + 1, NULL, 10);
			int k = 0;
			while (k < nkeys && strcmp(keys[k], tok) != 0)
				k++;
			if (k == nkeys) {
				if (nkeys == MAX_KEYS)
					continue;
				strcpy(keys[nkeys++], tok);
			}
			sums[k] += v;
			any |= v != 0;
		}
		procs += any;
	}
	fclose(f);
	/* one write: the line arrives whole among the caller's own output
	 * (stderr is unbuffered: each piece was a write of its own) */
	static char out[8192];
	setvbuf(stderr, out, _IOFBF, sizeof(out));
	fprintf(stderr, "libkeepalive: processes=%lu", procs);
	for (int k = 0; k < nkeys; k++)
		fprintf(stderr, " %s=%llu", keys[k], sums[k]);
	if (version[0])
		fprintf(stderr, " version=%s", version);
	fputc('\n', stderr);
	fflush(stderr);
}

/* The stats directory: flat, ours, made by the wrapper in a checked
 * parent. */
static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
}

static void usage(void)
{
	fputs("usage: keepalive-run --exec [--preload P] [--audit A] -- CMD [ARGS...]\n"
	      "       keepalive-run --watch PID [--stats F] [--dir D]\n",
	      stderr);
	exit(2);
}

/* the names the wrapper owns: the library's */
static int ours(const char *e)
{
	return !strncmp(e, "KEEPALIVE_", 10) || !strncmp(e, "LD_PRELOAD=", 11);
}

static int name_is(const char *e, const char *name)
{
	size_t n = strlen(name);
	return !strncmp(e, name, n) && e[n] == '=';
}

/* The caller's environment, from the entry point's memfd: NULL when there
 * is none (keepalive.sh run by hand), then ours is taken as it is. */
static char **saved_environ(void)
{
	const char *s = getenv("KEEPALIVE_ENV_FD");
	char *end;
	if (!s || !*s)
		return NULL;
	long fd = strtol(s, &end, 10);
	struct stat st;
	if (*end || fd < 0 || fd > 1 << 20 || fstat((int)fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return NULL;
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = pread((int)fd, buf + got, (size_t)st.st_size - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close((int)fd);
	if (got != (size_t)st.st_size)
		return NULL;
	buf[got] = 0;
	size_t n = 0;
	for (size_t i = 0; i < got; i++)
		n += !buf[i];
	char **env = calloc(n + 1, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	for (char *p = buf; p < buf + got && k < n; p += strlen(p) + 1)
		env[k++] = p;
	return env;
}

static char **command_environ(const char *preload, const char *audit)
{
	char **orig = saved_environ();
	if (!orig)
		orig = environ;
	size_t n = 0, m = 0;
	while (orig[n])
		n++;
	while (environ[m])
		m++;
	char **env = calloc(n + m + 3, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!ours(orig[i]) && !(audit && name_is(orig[i], "LD_AUDIT")))
			env[k++] = orig[i];
	for (size_t i = 0; i < m; i++)
		if (!strncmp(environ[i], "KEEPALIVE_", 10) && !name_is(environ[i], "KEEPALIVE_ENV_FD") &&
		    !name_is(environ[i], "KEEPALIVE_CWD_FD"))
			env[k++] = environ[i];
	static char pre[8192], aud[8192];
	if (preload && (size_t)snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload) < sizeof(pre))
		env[k++] = pre;
	if (audit && (size_t)snprintf(aud, sizeof(aud), "LD_AUDIT=%s", audit) < sizeof(aud))
		env[k++] = aud;
	env[k] = NULL;
	return env;
}

/* as env(1) and sh say it: 127 not found, 126 found but not run */
static int run_exec(const char *preload, const char *audit, char **cmd)
{
	/* back to the caller's working directory, removed (keepalive-main.c) */
	const char *c = getenv("KEEPALIVE_CWD_FD");
	if (c && *c) {
		char *end;
		long cfd = strtol(c, &end, 10);
		if (!*end && cfd >= 0 && cfd < 1 << 20 && fchdir((int)cfd) == 0)
			close((int)cfd);
	}
	char **env = command_environ(preload, audit);
	execvpe(cmd[0], cmd, env ? env : environ);
	int e = errno;
	if (e == ENOENT && !strchr(cmd[0], '/'))
		fprintf(stderr, "keepalive: %s: command not found\n", cmd[0]);
	else
		fprintf(stderr, "keepalive: %s: %s\n", cmd[0], strerror(e));
	return e == ENOENT ? 127 : 126;
}

static void at_end(const char *stats, const char *dir)
{
	if (stats)
		print_stats(stats);
	if (dir)
		remove_dir(dir);
}

/* close every fd from 3 up but keep (-1: none): all of them, not only
 * those below 1024 (a caller's pipe at fd 1500 was kept open) */
static void close_all_but(int keep)
{
#ifdef SYS_close_range
	if (keep < 3) {
		if (syscall(SYS_close_range, 3, ~0U, 0) == 0)
			return;
	} else if (syscall(SYS_close_range, 3, keep - 1, 0) == 0 &&
		   syscall(SYS_close_range, keep + 1, ~0U, 0) == 0) {
		return;
	}
#endif
	/* kernel < 5.9: one by one, up to the limit */
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 1 << 20)
		max = 1 << 20;
	for (long fd = 3; fd < max; fd++)
		if (fd != keep)
			close((int)fd);
}

static int run_watch(pid_t pid, const char *stats, const char *dir)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0 && errno == ESRCH) {
		at_end(stats, dir);
		return 0;
	}
	pid_t child = fork();
	if (child < 0) {
		/* no watcher: the directory stays, the stats are lost */
		return 1;
	}
	if (child > 0)
		_exit(0);
	/* its own session: a signal to the command's group (timeout, kill
	 * -- -PGID, Ctrl-C) is not for it; nothing of the caller's held but
	 * stderr (a caller reading a pipe to its end would wait for us) */
	setsid();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
	}
	close_all_but(pfd);
	if (pfd >= 0) {
		struct pollfd p = { pfd, POLLIN, 0 };
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	} else {
		/* kernel < 5.3: asked five times a second */
		while (kill(pid, 0) == 0 || errno == EPERM)
			usleep(200000);
	}
	at_end(stats, dir);
	return 0;
}

int main(int argc, char **argv)
{
	const char *preload = NULL, *audit = NULL, *dir = NULL, *stats = NULL;
	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "--exec")) {
		int i = 2;
		for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
			if (i + 1 >= argc)
				usage();
			if (!strcmp(argv[i], "--preload"))
				preload = argv[i + 1];
			else if (!strcmp(argv[i], "--audit"))
				audit = *argv[i + 1] ? argv[i + 1] : NULL;
			else
				usage();
		}
		if (i + 1 >= argc)
			usage();
		return run_exec(preload, audit, argv + i + 1);
	}
	if (!strcmp(argv[1], "--watch") && argc >= 3) {
		pid_t pid = (pid_t)atoi(argv[2]);
		for (int i = 3; i < argc; i += 2) {
			if (i + 1 >= argc)
				usage();
			if (!strcmp(argv[i], "--stats"))
				stats = *argv[i + 1] ? argv[i + 1] : NULL;
			else if (!strcmp(argv[i], "--dir"))
				dir = *argv[i + 1] ? argv[i + 1] : NULL;
			else
				usage();
		}
		if (pid <= 1)
			usage();
		return run_watch(pid, stats, dir);
	}
	usage();
	return 2;
}

/*
 * keepalive - the wrapper's entry point (docs/wrapper.md).  A shell cannot
 * hand a command the environment it was given: dash drops the variables
 * whose names are not identifiers and exported bash functions, and every
 * name the script assigns would reach the command.  So this program keeps
 * the caller's environment, byte for byte, in a memfd whose number it puts
 * in KEEPALIVE_ENV_FD, and runs the shell part (keepalive.sh, beside it or
 * in ../scripts/ in the build tree) that decides; the shell part ends in
 * `keepalive-run --exec`, which rebuilds the command's environment from
 * that copy plus the library's own variables (LD_PRELOAD, KEEPALIVE_*).
 * --compare goes straight to the compare script, told where we are and
 * given the same copy (both its sides run the command in it).
 * Fail open: without a memfd the shell part runs as it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

extern char **environ;

/* our own directory, symlinks resolved (/usr/bin/keepalive is one) */
static int self_dir(char *dir, size_t cap, const char *argv0)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
	} else if (!strchr(argv0, '/') || !realpath(argv0, buf)) {
		return -1;
	}
	char *slash = strrchr(buf, '/');
	if (!slash || (size_t)(slash - buf) >= cap)
		return -1;
	*slash = 0;
	snprintf(dir, cap, "%s", buf[0] ? buf : "/");
	return 0;
}

/* dir/name, else dir/../scripts/name (the build tree) */
static int find_part(char *out, size_t cap, const char *dir, const char *name)
{
	if ((size_t)snprintf(out, cap, "%s/%s", dir, name) < cap && access(out, R_OK) == 0)
		return 0;
	if ((size_t)snprintf(out, cap, "%s/../scripts/%s", dir, name) < cap && access(out, R_OK) == 0)
		return 0;
	return -1;
}

static int save_environ(void)
{
	int fd = memfd_create("keepalive-env", 0);
	if (fd < 0)
		return -1;
	for (char **e = environ; e && *e; e++) {
		size_t len = strlen(*e) + 1, off = 0;
		while (off < len) {
			ssize_t w = write(fd, *e + off, len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				close(fd);
				return -1;
			}
			off += (size_t)w;
		}
	}
	return fd;
}

/* Where the wrapper cannot work (no /proc to find itself, too few
 * descriptors for the shell part), a command is still run, as env(1)
 * would run it, without the library, rather than not at all (fail open;
 * docs/wrapper.md).  Returns only for an option (the shell part's). */
static void step_aside(int argc, char **argv)
{
	if (argc < 2 || (argv[1][0] == '-' && strcmp(argv[1], "--") != 0))
		return;
	int i = 1 + !strcmp(argv[1], "--");
	if (i >= argc)
		return;
	execvp(argv[i], argv + i);
	int e = errno;
	if (e == ENOENT && !strchr(argv[i], '/'))
		fprintf(stderr, "keepalive: %s: command not found\n", argv[i]);
	else
		fprintf(stderr, "keepalive: %s: %s\n", argv[i], strerror(e));
	exit(e == ENOENT ? 127 : 126);
}

int main(int argc, char **argv)
{
	char dir[PATH_MAX], part[PATH_MAX + 32], self[PATH_MAX + 16];
	if (self_dir(dir, sizeof(dir), argv[0]) < 0) {
		step_aside(argc, argv);
		fprintf(stderr, "keepalive: cannot tell where it is installed (/proc not mounted?)\n");
		return 127;
	}
	if (argc > 1 && !strcmp(argv[1], "--compare")) {
		if (find_part(part, sizeof(part), dir, "compare") < 0) {
			fprintf(stderr, "keepalive: %s/compare not found\n", dir);
			return 127;
		}
		/* both sides run CMD in the caller's environment, not bash's */
		int efd = save_environ();
		char efdnum[16];
		if (efd >= 0) {
			snprintf(efdnum, sizeof(efdnum), "%d", efd);
			setenv("KEEPALIVE_ENV_FD", efdnum, 1);
		} else {
			unsetenv("KEEPALIVE_ENV_FD");
		}
		snprintf(self, sizeof(self), "%s/keepalive", dir);
		setenv("KEEPALIVE_COMPARE_WRAPPER", self, 1);
		argv[1] = part;
		execv(part, argv + 1);
		fprintf(stderr, "keepalive: %s: %s\n", part, strerror(errno));
		return 126;
	}
	/* dash cannot run a script below 11 descriptors (it moves the
	 * script's to 10 or above): with so few, step aside */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 16)
		step_aside(argc, argv);
	if (find_part(part, sizeof(part), dir, "keepalive.sh") < 0) {
		fprintf(stderr, "keepalive: %s/keepalive.sh not found\n", dir);
		return 127;
	}
	/* a working directory that was removed: the shell part would say
	 * "sh: 0: getcwd() failed" on starting; it runs in / and keepalive-run
	 * goes back to it (KEEPALIVE_CWD_FD) before the exec */
	char cwd[PATH_MAX], cwdnum[16], runner[PATH_MAX + 16];
	snprintf(runner, sizeof(runner), "%s/keepalive-run", dir);
	if (!getcwd(cwd, sizeof(cwd)) && errno == ENOENT && access(runner, X_OK) == 0) {
		int cfd = open(".", O_PATH | O_DIRECTORY);
		if (cfd >= 0 && chdir("/") == 0) {
			snprintf(cwdnum, sizeof(cwdnum), "%d", cfd);
			setenv("KEEPALIVE_CWD_FD", cwdnum, 1);
		} else if (cfd >= 0) {
			close(cfd);
		}
	}
	int fd = save_environ();
	char num[16];
	if (fd >= 0) {
		snprintf(num, sizeof(num), "%d", fd);
		setenv("KEEPALIVE_ENV_FD", num, 1);
	} else {
		unsetenv("KEEPALIVE_ENV_FD");
	}
	char **args = calloc((size_t)argc + 2, sizeof(*args));
	if (!args)
		return 126;
	args[0] = "keepalive";
	args[1] = part;
	for (int i = 1; i < argc; i++)
		args[i + 1] = argv[i];
	execv("/bin/sh", args);
	fprintf(stderr, "keepalive: /bin/sh: %s\n", strerror(errno));
	return 126;
}

/*
 * keepalive-run - the part of the keepalive wrapper that must stay while
 * the command runs (docs/wrapper.md): the wrapper (scripts/keepalive) sets
 * everything up, then execs this, which
 *   - runs CMD with LD_PRELOAD=PRELOAD (this process is never preloaded);
 *   - passes TERM, INT, HUP, QUIT, USR1, USR2 sent to it on to CMD (not a
 *     terminal's own signal: the terminal sent it to CMD's group already);
 *   - when CMD ends: prints the summed KEEPALIVE_STATS line (--stats),
 *     stops the private broker (--broker-pid), removes the private
 *     directory (--dir) and then ends as CMD did: its exit status, or death
 *     by its signal (handler reset, signal re-raised, as timeout(1) does),
 *     so that a shell loop interrupted by Ctrl-C stops.
 * usage: keepalive-run [--preload P] [--dir D] [--broker-pid N] [--stats F] -- CMD [ARGS...]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define N_FORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))
static volatile pid_t child;

static void forward(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	/* SI_KERNEL: the terminal's Ctrl-C or Ctrl-\, sent to the whole
	 * foreground group, CMD included: a second copy would be one too many */
	if (si && si->si_code == SI_KERNEL)
		return;
	if (child > 0)
		kill(child, sig);
}

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
	fprintf(stderr, "libkeepalive: processes=%lu", procs);
	for (int k = 0; k < nkeys; k++)
		fprintf(stderr, " %s=%llu", keys[k], sums[k]);
	if (version[0])
		fprintf(stderr, " version=%s", version);
	fputc('\n', stderr);
}

/* The private directory, when no broker removes it (none, or it died):
 * flat, ours, made by the wrapper or the broker in a checked parent. */
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
	fputs("usage: keepalive-run [--preload P] [--dir D] [--broker-pid N] [--stats F] -- CMD [ARGS...]\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *preload = NULL, *dir = NULL, *stats = NULL;
	pid_t bpid = 0;
	int i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--preload"))
			preload = argv[i + 1];
		else if (!strcmp(argv[i], "--dir"))
			dir = *argv[i + 1] ? argv[i + 1] : NULL;
		else if (!strcmp(argv[i], "--broker-pid"))
			bpid = (pid_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--stats"))
			stats = *argv[i + 1] ? argv[i + 1] : NULL;
		else
			usage();
	}
	if (i + 1 >= argc)
		usage();
	char **cmd = argv + i + 1;

	/* blocked across fork: a signal that comes before the child exists
	 * waits for it; the child starts with the mask and handlers it had */
	sigset_t set, old;
	sigemptyset(&set);
	for (size_t k = 0; k < N_FORWARDED; k++)
		sigaddset(&set, forwarded[k]);
	sigprocmask(SIG_BLOCK, &set, &old);
	struct sigaction sa = { .sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART };
	sigfillset(&sa.sa_mask);
	struct sigaction prev[N_FORWARDED];
	for (size_t k = 0; k < N_FORWARDED; k++)
		sigaction(forwarded[k], &sa, &prev[k]);

	pid_t pid = fork();
	if (pid == 0) {
		for (size_t k = 0; k < N_FORWARDED; k++)
			sigaction(forwarded[k], &prev[k], NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (preload)
			setenv("LD_PRELOAD", preload, 1);
		execvp(cmd[0], cmd);
		int e = errno;
		fprintf(stderr, "keepalive: %s: %s\n", cmd[0], e == ENOENT ? "command not found" : strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	int status = 0;
	if (pid < 0) {
		fprintf(stderr, "keepalive: cannot run %s: %s\n", cmd[0], strerror(errno));
		status = 126 << 8;
	} else {
		child = pid;
		sigprocmask(SIG_SETMASK, &old, NULL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		child = 0;
	}
	if (stats)
		print_stats(stats);
	/* the broker removes its directory when it goes; else it is ours */
	if (!(bpid > 1 && kill(bpid, SIGTERM) == 0) && dir)
		remove_dir(dir);
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		/* the command dumped its own core, if any: not a second one */
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		signal(sig, SIG_DFL);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		raise(sig);
		return 128 + sig; /* a signal whose default is to be ignored */
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

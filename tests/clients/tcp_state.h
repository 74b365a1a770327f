/*
 * tcp_state.h - what a test client sees of its own socket in the kernel's
 * tables, and the idle close it cues (header-only, as common.h: the
 * Makefile builds each tests/clients/NAME.c on its own).  Used by the
 * clients that await the server's FIN or reset on their socket before
 * they act: events the program alone would see too, never timings.
 */
#ifndef TEST_CLIENTS_TCP_STATE_H
#define TEST_CLIENTS_TCP_STATE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The inode of fd's socket (what /proc/net/tcp names it by), 0 if none. */
static __attribute__((unused)) ino_t inode(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* The state of the TCP socket of inode ino (/proc/net/tcp: 1
 * ESTABLISHED, 8 CLOSE_WAIT...), 0 when none is listed (CLOSE: reset,
 * gone). */
static __attribute__((unused)) int tcp_state(ino_t ino)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	char line[512];
	int st = 0;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned s;
		unsigned long i;
		if (sscanf(line, "%*s %*s %*s %x %*s %*s %*s %*s %*s %lu", &s, &i) == 2 && i == ino)
			st = (int)s;
	}
	if (f)
		fclose(f);
	return st;
}

/* Cues the idle close of a cue server (tests/servers/idle_cue.py,
 * tls_idle_cue.py: "close" into DIR/cue) and is back once it closed its
 * idle kept connections, with its answer (DIR/done's first line: how
 * many, and for tls_idle_cue.py their ports) in line; exits 1 if either
 * file fails. */
static __attribute__((unused)) void cue_close_line(const char *dir, char *line, int size)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/cue", dir);
	FILE *f = fopen(path, "w");
	if (f && fputs("close\n", f) >= 0 && !fclose(f)) {
		snprintf(path, sizeof(path), "%s/done", dir);
		f = fopen(path, "r");
		if (f && fgets(line, size, f)) {
			fclose(f);
			return;
		}
	}
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, path, strerror(errno));
	exit(1);
}

/* cue_close_line's count: how many kept connections the server closed */
static __attribute__((unused)) int cue_close_count(const char *dir)
{
	char line[16];
	cue_close_line(dir, line, sizeof(line));
	return atoi(line);
}

#endif

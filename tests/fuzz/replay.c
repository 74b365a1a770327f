/*
 * replay.c - a main() for the fuzz harnesses without libFuzzer: runs
 * LLVMFuzzerTestOneInput on every file named (or in every directory
 * named), so that `make unit` checks the seeds and the committed crash
 * inputs with any compiler.  Usage: fuzz_<name> FILE|DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int count;

static void run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) {
		perror(path);
		exit(2);
	}
	rewind(f);
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		perror(path);
		exit(2);
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	count++;
}

int main(int argc, char **argv)
{
	char path[4096];
	struct stat st;
	int i;

	for (i = 1; i < argc; i++) {
		DIR *d;
		struct dirent *de;

		if (stat(argv[i], &st) != 0)
			continue; /* an optional directory that is not there */
		if (!S_ISDIR(st.st_mode)) {
			run_file(argv[i]);
			continue;
		}
		d = opendir(argv[i]);
		while (d && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			run_file(path);
		}
		if (d)
			closedir(d);
	}
	printf("%s: %d inputs replayed, no invariant broken\n", argv[0], count);
	return 0;
}

/*
 * select_sets.c - select() with sets that are not struct fd_set: larger
 * (nfds past FD_SETSIZE, the program's own allocation) and smaller (one
 * word, sized to nfds, at the end of a page with the next one unmapped).
 *
 *   select_sets PORT      (nginx on 127.0.0.1:PORT serving /f)
 *
 * Each of the two: a GET of /f asking to close, the response read by its
 * Content-Length (not to EOF), then select() for reading with a 3 s
 * timeout: the server has closed, so the socket is readable at once.
 * Prints "big: select R isset S" and "small: select R isset S".
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

static int port;

/* a GET of /f asking to close, its response read by Content-Length */
static int get(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		exit(1);
	const char req[] = "GET /f HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	if (write(s, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
		exit(1);
	char buf[4096];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(s, buf + got, sizeof(buf) - 1 - got);
		if (r <= 0)
			exit(1);
		got += (size_t)r;
		buf[got] = 0;
		char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "content-length:");
		if (end && cl && got >= (size_t)(end + 4 - buf) + strtoul(cl + 15, NULL, 10))
			return s;
	}
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	port = atoi(argv[1]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max < 1700)
		return 3;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);

	int s = get();
	int big = fcntl(s, F_DUPFD, 1600);
	close(s);
	if (big < 1600)
		return 1;
	size_t words = (size_t)(big + 64) / 64;
	unsigned long *set = calloc(words, sizeof(unsigned long));
	set[big / 64] |= 1UL << (big % 64);
	struct timeval tv = { 3, 0 };
	int r = select(big + 1, (fd_set *)set, NULL, NULL, &tv);
	printf("big: select %d isset %d\n", r, (int)(set[big / 64] >> (big % 64) & 1));
	close(big);

	s = get();
	if (s >= 64)
		return 1;
	char *pg = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pg == MAP_FAILED || munmap(pg + 4096, 4096) < 0)
		return 1;
	unsigned long *one = (unsigned long *)(pg + 4096 - sizeof(unsigned long));
	*one = 1UL << s;
	tv = (struct timeval){ 3, 0 };
	r = select(s + 1, (fd_set *)one, NULL, NULL, &tv);
	printf("small: select %d isset %d\n", r, (int)(*one >> s & 1));
	close(s);
	return 0;
}

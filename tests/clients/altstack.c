/*
 * altstack.c - a request made from a signal handler that runs on an
 * alternate stack of 8 KiB (the classic SIGSTKSZ; a guard page below it):
 * connect, write, read to EOF, close, as a handler may (all
 * async-signal-safe).  One request first from main (the calls bound),
 * then two from the handler.  Prints whether each was answered (to EOF).  The
 * library's close path once took 8.4 KiB there (its stack arrays): the
 * handler ran off the stack (tests/signals.bats; docs/binding.md).
 *
 * usage: altstack PORT PATH
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define ALT_SIZE 8192

static int port;
static const char *path;
static volatile ssize_t got;

static void one_request(void)
{
	got = -1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return;
	}
	char req[256];
	size_t n = 0;
	const char *parts[] = { "GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" };
	for (int i = 0; i < 3; i++) {
		size_t l = strlen(parts[i]);
		memcpy(req + n, parts[i], l);
		n += l;
	}
	if (write(fd, req, n) != (ssize_t)n) {
		close(fd);
		return;
	}
	char buf[256];
	ssize_t r, total = 0;
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		total += r;
	close(fd);
	got = r == 0 ? total : -1;
}

static void on_usr1(int sig)
{
	(void)sig;
	one_request();
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return fprintf(stderr, "usage: altstack PORT PATH\n"), 2;
	port = atoi(argv[1]);
	path = argv[2];
	char *m = mmap(NULL, ALT_SIZE + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || mprotect(m, 4096, PROT_NONE) < 0)
		return perror("mmap"), 1;
	stack_t ss = { .ss_sp = m + 4096, .ss_size = ALT_SIZE };
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };
	if (sigaltstack(&ss, NULL) < 0 || sigaction(SIGUSR1, &sa, NULL) < 0)
		return perror("sigaltstack"), 1;
	one_request();
	printf("main: %s\n", got > 0 ? "answered" : "failed");
	for (int i = 0; i < 2; i++) {
		raise(SIGUSR1);
		printf("handler: %s\n", got > 0 ? "answered" : "failed");
	}
	return 0;
}

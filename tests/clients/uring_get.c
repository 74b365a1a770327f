/*
 * uring_get - one GET /f with write() and read() (kept alive), close, a new
 * connect() to the same server, then GET /f again sent with io_uring
 * (IORING_OP_SEND) and its answer read with io_uring (IORING_OP_RECV)
 * to its end: reads and writes the library cannot see, so this process
 * must never be handed a kept connection (docs/limits.md "io_uring").
 * The ring is set up first, with syscall(SYS_io_uring_setup) (Rust's
 * io-uring, an older liburing), or, built as uring_lib_get, through
 * liburing_inline.so, whose system calls are inline (liburing 2.2 on).
 * Prints each answer's status line and body length, and "uring recv <r>".
 * Usage: uring_get HOST PORT [late]
 * late: GET /f asking to close, written with write(), then the ring set
 * up, and IORING_OP_RECV to the end (0): the answer's status line, its
 * body length and the last result.
 */
#include <arpa/inet.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef URING_LIB
int io_uring_setup(unsigned entries, struct io_uring_params *p);
int io_uring_enter(unsigned fd, unsigned submit, unsigned wait, unsigned flags, void *sig);
#define RING_SETUP(n, p) io_uring_setup(n, p)
#define RING_ENTER(fd) io_uring_enter(fd, 1, 1, IORING_ENTER_GETEVENTS, NULL)
#else
#define RING_SETUP(n, p) (int)syscall(SYS_io_uring_setup, n, p)
#define RING_ENTER(fd) (int)syscall(SYS_io_uring_enter, fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0)
#endif

static int ring;
static struct io_uring_sqe *sqes;
static unsigned *sq_tail, *sq_array, *sq_mask, *cq_head, *cq_mask;
static struct io_uring_cqe *cqes;

static void setup(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	ring = RING_SETUP(4, &p);
	if (ring < 0)
		exit(5);
	char *sq = mmap(0, p.sq_off.array + p.sq_entries * 4, PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
	char *cq = mmap(0, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
			PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
	sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
		exit(5);
	sq_tail = (void *)(sq + p.sq_off.tail);
	sq_array = (void *)(sq + p.sq_off.array);
	sq_mask = (void *)(sq + p.sq_off.ring_mask);
	cq_head = (void *)(cq + p.cq_off.head);
	cq_mask = (void *)(cq + p.cq_off.ring_mask);
	cqes = (void *)(cq + p.cq_off.cqes);
}

/* one operation, waited for: its result */
static int submit(int op, int fd, void *addr, unsigned len)
{
	unsigned t = *sq_tail, i = t & *sq_mask;
	struct io_uring_sqe *e = &sqes[i];
	memset(e, 0, sizeof *e);
	e->opcode = (__u8)op;
	e->fd = fd;
	e->addr = (unsigned long)addr;
	e->len = len;
	sq_array[i] = i;
	__atomic_store_n(sq_tail, t + 1, __ATOMIC_RELEASE);
	if (RING_ENTER(ring) < 0)
		exit(6);
	unsigned h = *cq_head;
	int res = cqes[h & *cq_mask].res;
	__atomic_store_n(cq_head, h + 1, __ATOMIC_RELEASE);
	return res;
}

/* the answer in buf is whole: its head and Content-Length bytes */
static int whole(const char *buf, int n)
{
	const char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4), *cl;
	if (!end)
		return 0;
	cl = strcasestr(buf, "content-length:");
	return cl && cl < end && n >= (int)(end + 4 - buf) + atoi(cl + 15);
}

static void show(const char *buf, int n)
{
	const char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4);
	printf("%.*s body %d\n", (int)strcspn(buf, "\r"), buf, end ? n - (int)(end + 4 - buf) : -1);
}

/* late: the ring made after a request asking to close went out by write() */
static int late(const struct sockaddr_in *a)
{
	static char rq[] = "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	static char buf[65536];
	int n = 0, r;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof *a) < 0)
		return 2;
	if (write(fd, rq, sizeof rq - 1) != (ssize_t)sizeof rq - 1)
		return 3;
	setup();
	while ((r = submit(IORING_OP_RECV, fd, buf + n, sizeof buf - 1 - (unsigned)n)) > 0)
		buf[n += r] = 0;
	show(buf, n);
	printf("uring recv to the end: %d\n", r);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4)
		return 2;
	setvbuf(stdout, NULL, _IONBF, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	if (argc == 4)
		return late(&a);
	setup();
	static char rq[] = "GET /f HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[8192];
	int n = 0, r;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		return 2;
	if (write(fd, rq, sizeof rq - 1) != (ssize_t)sizeof rq - 1)
		return 3;
	while (!whole(buf, n) && (r = (int)read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0)
		buf[n += r] = 0;
	show(buf, n);
	close(fd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		return 2;
	printf("uring send %d\n", submit(IORING_OP_SEND, fd, rq, sizeof rq - 1));
	n = 0;
	buf[0] = 0;
	while (!whole(buf, n) && (r = submit(IORING_OP_RECV, fd, buf + n, sizeof buf - 1 - (unsigned)n)) > 0)
		buf[n += r] = 0;
	show(buf, n);
	printf("uring recv %s\n", whole(buf, n) ? "whole" : "cut");
	close(fd);
	return 0;
}

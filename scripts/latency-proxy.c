/*
 * latency-proxy.c - a WAN link in user space, for benchmarks on loopback
 * (netem is not available where they run).  A TCP relay that delays every
 * byte the way a link with round-trip time RTT would.
 *
 *   latency-proxy --listen 127.0.0.1:PORT --to 127.0.0.1:PORT --rtt MS
 *                 [--port-file FILE] [--queue KIB]
 *
 * For each accepted connection it connects to the upstream and relays bytes
 * both ways:
 *   - the handshake: bytes read before accept + RTT leave as if read at
 *     accept + RTT (when the client's connect() would have returned), so
 *     nothing is relayed before then and a fresh HTTP request costs 2 RTT;
 *   - the one-way delay: bytes read from one side at t are written to the
 *     other at t + RTT/2, in order; chunks due by then go out in one writev;
 *   - EOF becomes shutdown(SHUT_WR) toward the other side, RTT/2 late and
 *     after the bytes before it; a reset or an error resets both sides
 *     (SO_LINGER 0: a reset must not look like a clean end), at once.
 * Bandwidth is not modelled, but each direction's queue is bounded (--queue,
 * default 4096 KiB): a side whose queue is full is not read and TCP flow
 * control slows its sender, so one direction carries at most queue/(RTT/2).
 *
 * One thread, epoll edge-triggered.  The directions waiting for their head
 * chunk sit in a binary heap keyed by its due time; one timerfd is armed at
 * the earliest, so the loop sleeps until something is due or readable.
 * --listen port 0 picks a free port; --port-file gets it (written to a
 * temporary file, then renamed) once the socket listens.  SIGTERM and SIGINT
 * close everything and exit 0.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_BYTES (256 * 1024) /* one read() */
#define IOV_BATCH 64             /* chunks per writev */
#define PUMP_ROUNDS 8            /* read/write rounds of one direction before others get a turn */

enum kind { K_CLIENT, K_UPSTREAM, K_LISTENER, K_TIMER, K_SIGNAL };

struct chunk {
	struct chunk *next;
	uint64_t due; /* CLOCK_MONOTONIC ns */
	size_t len, off, cap;
	bool eof; /* no bytes: shutdown(SHUT_WR) the destination */
	char data[];
};

struct link;

/* One socket of a link.  Edge-triggered: readable/writable stay set until a
 * read or write says EAGAIN. */
struct end {
	enum kind kind; /* first: epoll's data.ptr may point at any handle */
	int fd;
	bool readable, writable;
	struct link *link;
	struct dir *in, *out; /* the direction that reads from / writes to it */
};

/* Bytes read from src waiting to be written to dst. */
struct dir {
	struct link *link;
	struct end *src, *dst;
	struct chunk *head, **tailp;
	size_t queued;   /* bytes held, chunk headers included: the backpressure measure */
	bool src_eof;    /* read() gave 0: the EOF chunk is queued */
	bool done;       /* the EOF is relayed */
	bool blocked;    /* the head is due but dst is full: waiting for EPOLLOUT */
	bool in_again;   /* on the again list: pumping it was cut short */
	struct dir *again_next;
	uint64_t timer_due;
	long heap_pos; /* -1: not in the heap */
};

struct link {
	struct end end[2]; /* client, upstream */
	struct dir dir[2]; /* client -> upstream, upstream -> client */
	uint64_t gate;     /* accept + RTT: the handshake; nothing is due before gate + RTT/2 */
	bool connecting;   /* the upstream connect() has not finished */
	bool dead;         /* closed; freed at the end of the loop iteration */
	struct link *prev, *next;
};

static uint64_t rtt_ns, delay_ns; /* delay = RTT/2 */
static size_t queue_max = 4096 * 1024;
static struct sockaddr_storage up_addr;
static socklen_t up_len;

static int ep = -1, listen_fd = -1, timer_fd = -1, sig_fd = -1;
static struct end listener_h = { .kind = K_LISTENER }, timer_h = { .kind = K_TIMER },
		  signal_h = { .kind = K_SIGNAL };
static bool accept_paused;
static uint64_t timer_armed; /* 0: not armed */

static struct link *links;     /* open links */
static size_t n_links;
static struct link *graveyard; /* closed this iteration: events may still name them */
static struct dir *again;      /* directions to pump again without waiting for an event */

static struct dir **heap;
static size_t heap_n, heap_cap;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("latency-proxy: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ timer heap */

static bool heap_less(size_t a, size_t b)
{
	return heap[a]->timer_due < heap[b]->timer_due;
}

static void heap_swap(size_t a, size_t b)
{
	struct dir *t = heap[a];
	heap[a] = heap[b];
	heap[b] = t;
	heap[a]->heap_pos = (long)a;
	heap[b]->heap_pos = (long)b;
}

static void heap_up(size_t i)
{
	while (i > 0 && heap_less(i, (i - 1) / 2)) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < heap_n && heap_less(l, m))
			m = l;
		if (r < heap_n && heap_less(r, m))
			m = r;
		if (m == i)
			return;
		heap_swap(i, m);
		i = m;
	}
}

static void heap_remove(struct dir *d)
{
	if (d->heap_pos < 0)
		return;
	size_t i = (size_t)d->heap_pos;
	d->heap_pos = -1;
	if (i == --heap_n)
		return;
	heap[i] = heap[heap_n];
	heap[i]->heap_pos = (long)i;
	heap_down(i);
	heap_up(i);
}

/* Never fails: link_open() reserved a slot for each direction. */
static void heap_set(struct dir *d, uint64_t due)
{
	d->timer_due = due;
	if (d->heap_pos < 0) {
		d->heap_pos = (long)heap_n;
		heap[heap_n++] = d;
	}
	heap_down((size_t)d->heap_pos);
	heap_up((size_t)d->heap_pos);
}

/* ------------------------------------------------------------ links */

/* Full-size chunks are recycled: at loopback speed malloc would otherwise
 * grow and trim the heap (brk) for nearly every read. */
#define SPARE_MAX 64
static struct chunk *spare;
static unsigned n_spare;

static struct chunk *chunk_new(void)
{
	struct chunk *c = spare;
	if (c) {
		spare = c->next;
		n_spare--;
		return c;
	}
	return malloc(sizeof(*c) + CHUNK_BYTES);
}

static void chunk_free(struct chunk *c)
{
	if (c->cap == CHUNK_BYTES && n_spare < SPARE_MAX) {
		c->next = spare;
		spare = c;
		n_spare++;
	} else {
		free(c);
	}
}

static void free_chunks(struct dir *d)
{
	while (d->head) {
		struct chunk *c = d->head;
		d->head = c->next;
		chunk_free(c);
	}
	d->tailp = &d->head;
	d->queued = 0;
}

static void accept_resume(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &listener_h };
	if (accept_paused && epoll_ctl(ep, EPOLL_CTL_MOD, listen_fd, &ev) == 0)
		accept_paused = false;
}

/* Out of file descriptors: a level-triggered listener would wake us for
 * ever, so it sleeps until a link closes. */
static void accept_pause(void)
{
	struct epoll_event ev = { .events = 0, .data.ptr = &listener_h };
	if (!accept_paused && epoll_ctl(ep, EPOLL_CTL_MOD, listen_fd, &ev) == 0)
		accept_paused = true;
}

/* Closes both sockets; with reset, abortively (RST) so that neither peer
 * mistakes the end for an orderly one.  The link is freed later. */
static void link_close(struct link *l, bool reset)
{
	if (l->dead)
		return;
	l->dead = true;
	for (int i = 0; i < 2; i++) {
		if (l->end[i].fd >= 0) {
			if (reset) {
				struct linger lg = { .l_onoff = 1, .l_linger = 0 };
				setsockopt(l->end[i].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			}
			close(l->end[i].fd); /* also leaves the epoll set */
			l->end[i].fd = -1;
		}
		heap_remove(&l->dir[i]);
		free_chunks(&l->dir[i]);
	}
	if (l->prev)
		l->prev->next = l->next;
	else
		links = l->next;
	if (l->next)
		l->next->prev = l->prev;
	n_links--;
	l->next = graveyard;
	graveyard = l;
	accept_resume();
}

static bool can_read(const struct dir *d)
{
	return d->src->readable && !d->src_eof && d->queued < queue_max;
}

/*
 * Reads what src has while the queue has room, each read a chunk due RTT/2
 * later (or at the end of the handshake plus RTT/2).  Returns false when the
 * link was closed (a reset or an error).
 */
static bool dir_read(struct dir *d)
{
	struct link *l = d->link;
	while (can_read(d)) {
		struct chunk *c = chunk_new();
		if (!c) {
			say("out of memory");
			link_close(l, true);
			return false;
		}
		ssize_t n = recv(d->src->fd, c->data, CHUNK_BYTES, 0);
		c->cap = CHUNK_BYTES;
		if (n < 0) {
			int e = errno;
			chunk_free(c);
			if (e == EINTR)
				continue;
			if (e == EAGAIN || e == EWOULDBLOCK) {
				d->src->readable = false;
				break;
			}
			link_close(l, true);
			return false;
		}
		uint64_t t = now_ns();
		if ((size_t)n < CHUNK_BYTES / 2) {
			/* shrinking is done in place: no copy */
			struct chunk *s = realloc(c, sizeof(*c) + (size_t)n);
			if (s)
				c = s, c->cap = (size_t)n;
		}
		c->next = NULL;
		c->due = (t > l->gate ? t : l->gate) + delay_ns;
		c->len = (size_t)n;
		c->off = 0;
		c->eof = n == 0;
		*d->tailp = c;
		d->tailp = &c->next;
		d->queued += sizeof(*c) + c->cap;
		if (c->eof) {
			d->src_eof = true;
			break;
		}
	}
	return true;
}

static void dir_pop(struct dir *d)
{
	struct chunk *c = d->head;
	d->head = c->next;
	if (!d->head)
		d->tailp = &d->head;
	d->queued -= sizeof(*c) + c->cap;
	chunk_free(c);
}

/*
 * Writes the chunks that are due, until dst is full.  Returns false when the
 * link was closed (an error, or the last EOF relayed).
 */
static bool dir_flush(struct dir *d)
{
	struct link *l = d->link;
	struct end *dst = d->dst;
	d->blocked = false;
	while (d->head) {
		uint64_t now = now_ns();
		if (d->head->due > now)
			break;
		if (!dst->writable) {
			d->blocked = true;
			break;
		}
		if (d->head->eof) {
			if (shutdown(dst->fd, SHUT_WR) < 0) {
				link_close(l, true);
				return false;
			}
			dir_pop(d);
			d->done = true;
			if (l->dir[0].done && l->dir[1].done) {
				link_close(l, false);
				return false;
			}
			break;
		}
		struct iovec iov[IOV_BATCH];
		int n = 0;
		for (struct chunk *c = d->head; c && n < IOV_BATCH && !c->eof && c->due <= now; c = c->next)
			iov[n++] = (struct iovec){ c->data + c->off, c->len - c->off };
		struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(dst->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				dst->writable = false;
				d->blocked = true;
				break;
			}
			link_close(l, true);
			return false;
		}
		size_t left = (size_t)w;
		while (left) {
			struct chunk *c = d->head;
			size_t k = c->len - c->off;
			if (left < k) {
				c->off += left;
				break;
			}
			left -= k;
			dir_pop(d);
		}
	}
	return true;
}

static void dir_schedule(struct dir *d)
{
	if (d->link->dead || d->in_again || !d->head || d->blocked)
		heap_remove(d);
	else
		heap_set(d, d->head->due);
}

/*
 * Moves what can move now: writes the due chunks, reads while there is room,
 * and again, for a bounded number of rounds (at RTT 0 a fast pair would never
 * let go); then sleeps on the heap, on EPOLLOUT or on the again list.
 */
static void dir_pump(struct dir *d)
{
	for (int round = 0;; round++) {
		if (!dir_flush(d) || d->link->dead)
			return;
		bool writable_due = d->head && d->head->due <= now_ns() && d->dst->writable;
		if (!can_read(d) && !writable_due)
			break;
		if (round == PUMP_ROUNDS) {
			if (!d->in_again) {
				d->in_again = true;
				d->again_next = again;
				again = d;
			}
			break;
		}
		if (!dir_read(d))
			return;
	}
	dir_schedule(d);
}

static bool set_nodelay(int fd)
{
	/* the relay writes each chunk when it is due: Nagle must not hold one
	 * back for an ACK (delayed ACKs cost 40 ms) */
	int one = 1;
	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0;
}

static void reset_close(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/* A new client: connect to the upstream and start the handshake clock. */
static void link_open(int cfd)
{
	uint64_t t = now_ns();
	if (heap_cap < 2 * (n_links + 1)) {
		size_t cap = heap_cap ? 2 * heap_cap : 1024;
		struct dir **h = realloc(heap, cap * sizeof(*h));
		if (!h) {
			reset_close(cfd);
			return;
		}
		heap = h;
		heap_cap = cap;
	}
	int ufd = socket(up_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ufd < 0) {
		if (errno == EMFILE || errno == ENFILE)
			accept_pause();
		reset_close(cfd);
		return;
	}
	struct link *l = calloc(1, sizeof(*l));
	if (!l) {
		close(ufd);
		reset_close(cfd);
		return;
	}
	set_nodelay(cfd);
	set_nodelay(ufd);
	l->gate = t + rtt_ns;
	l->end[0] = (struct end){ .kind = K_CLIENT, .fd = cfd, .link = l, .in = &l->dir[0], .out = &l->dir[1] };
	l->end[1] = (struct end){ .kind = K_UPSTREAM, .fd = ufd, .link = l, .in = &l->dir[1], .out = &l->dir[0] };
	for (int i = 0; i < 2; i++) {
		struct dir *d = &l->dir[i];
		d->link = l;
		d->src = &l->end[i];
		d->dst = &l->end[1 - i];
		d->tailp = &d->head;
		d->heap_pos = -1;
	}
	l->next = links;
	if (links)
		links->prev = l;
	links = l;
	n_links++;

	if (connect(ufd, (struct sockaddr *)&up_addr, up_len) < 0) {
		if (errno != EINPROGRESS) {
			say("connect to upstream: %s", strerror(errno));
			link_close(l, true);
			return;
		}
		l->connecting = true;
	}
	for (int i = 0; i < 2; i++) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
					  .data.ptr = &l->end[i] };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, l->end[i].fd, &ev) < 0) {
			say("epoll_ctl: %s", strerror(errno));
			link_close(l, true);
			return;
		}
	}
}

static void on_accept(void)
{
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				accept_pause();
			return;
		}
		link_open(fd);
	}
}

static void on_end(struct end *e, uint32_t events)
{
	struct link *l = e->link;
	if (l->dead)
		return;
	if (e->kind == K_UPSTREAM && l->connecting) {
		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			say("connect to upstream: %s", strerror(err));
			link_close(l, true);
			return;
		}
		l->connecting = false;
	}
	/* errors and hang-ups surface through the next read or write */
	if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
		e->writable = true;
		dir_pump(e->out);
	}
	if (!l->dead && (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
		e->readable = true;
		dir_pump(e->in);
	}
}

static void arm_timer(void)
{
	uint64_t due = heap_n ? heap[0]->timer_due : 0;
	if (due == timer_armed)
		return;
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)(due / 1000000000u),
						.tv_nsec = (long)(due % 1000000000u) } };
	/* an absolute time already past fires at once; 0 disarms */
	if (timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		timer_armed = due;
}

static void run_due(void)
{
	uint64_t now = now_ns();
	while (heap_n && heap[0]->timer_due <= now) {
		struct dir *d = heap[0];
		heap_remove(d);
		dir_pump(d);
	}
}

static void run_again(void)
{
	struct dir *list = again;
	again = NULL;
	while (list) {
		struct dir *d = list;
		list = d->again_next;
		d->in_again = false;
		if (!d->link->dead)
			dir_pump(d);
	}
}

static void bury(void)
{
	if (!graveyard)
		return;
	struct dir **pp = &again;
	while (*pp) {
		if ((*pp)->link->dead)
			*pp = (*pp)->again_next;
		else
			pp = &(*pp)->again_next;
	}
	while (graveyard) {
		struct link *l = graveyard;
		graveyard = l->next;
		free(l);
	}
}

/* ------------------------------------------------------------ setup */

/* "127.0.0.1:80", "[::1]:80", "localhost:80".  Returns 0 or -1. */
static int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[256];
	const char *port;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':' || (size_t)(rb - s - 1) >= sizeof(host))
			return -1;
		memcpy(host, s + 1, (size_t)(rb - s - 1));
		host[rb - s - 1] = 0;
		port = rb + 2;
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof(host))
			return -1;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = 0;
		port = colon + 1;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res;
	if (!*host || !*port || getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int write_port_file(const char *path, unsigned port)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -1;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%u\n", port);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: latency-proxy --listen ADDR:PORT --to ADDR:PORT --rtt MS "
			"[--port-file FILE] [--queue KIB]\n");
	exit(2);
}

static int epoll_add(int fd, uint32_t events, struct end *h)
{
	struct epoll_event ev = { .events = events, .data.ptr = h };
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },   { "to", required_argument, NULL, 't' },
		{ "rtt", required_argument, NULL, 'r' },      { "port-file", required_argument, NULL, 'p' },
		{ "queue", required_argument, NULL, 'q' },    { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen_s = NULL, *to_s = NULL, *rtt_s = NULL, *port_file = NULL;
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'l': listen_s = optarg; break;
		case 't': to_s = optarg; break;
		case 'r': rtt_s = optarg; break;
		case 'p': port_file = optarg; break;
		case 'q': {
			char *end;
			unsigned long kib = strtoul(optarg, &end, 10);
			if (*end || !kib || kib > (1ul << 30))
				usage();
			queue_max = kib * 1024;
			break;
		}
		default: usage();
		}
	}
	if (!listen_s || !to_s || !rtt_s || optind != argc)
		usage();
	char *end;
	double rtt_ms = strtod(rtt_s, &end);
	if (*end || !(rtt_ms >= 0) || rtt_ms > 3600e3)
		usage();
	rtt_ns = (uint64_t)(rtt_ms * 1e6 + 0.5);
	delay_ns = rtt_ns / 2;

	struct sockaddr_storage la;
	socklen_t la_len;
	if (parse_addr(listen_s, &la, &la_len) < 0) {
		say("bad --listen %s", listen_s);
		return 2;
	}
	if (parse_addr(to_s, &up_addr, &up_len) < 0) {
		say("bad --to %s", to_s);
		return 2;
	}

	/* hundreds of links are twice as many descriptors */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);

	int one = 1;
	listen_fd = socket(la.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(listen_fd, (struct sockaddr *)&la, la_len) < 0 || listen(listen_fd, 4096) < 0) {
		say("listen on %s: %s", listen_s, strerror(errno));
		return 1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	sig_fd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ep < 0 || timer_fd < 0 || sig_fd < 0 || epoll_add(listen_fd, EPOLLIN, &listener_h) < 0 ||
	    epoll_add(timer_fd, EPOLLIN, &timer_h) < 0 || epoll_add(sig_fd, EPOLLIN, &signal_h) < 0) {
		say("setup: %s", strerror(errno));
		return 1;
	}
	if (port_file) {
		struct sockaddr_storage bound;
		socklen_t blen = sizeof(bound);
		getsockname(listen_fd, (struct sockaddr *)&bound, &blen);
		unsigned port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
								   : ((struct sockaddr_in *)&bound)->sin_port);
		if (write_port_file(port_file, port) < 0) {
			say("cannot write %s: %s", port_file, strerror(errno));
			return 1;
		}
	}

	struct epoll_event evs[256];
	for (bool running = true; running;) {
		arm_timer();
		int n = epoll_wait(ep, evs, 256, again ? 0 : -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			say("epoll_wait: %s", strerror(errno));
			return 1;
		}
		for (int i = 0; i < n; i++) {
			struct end *h = evs[i].data.ptr;
			switch (h->kind) {
			case K_LISTENER: on_accept(); break;
			case K_TIMER: {
				uint64_t ticks;
				if (read(timer_fd, &ticks, sizeof(ticks)) == sizeof(ticks))
					timer_armed = 0; /* fired: one-shot */
				break;
			}
			case K_SIGNAL: running = false; break;
			default: on_end(h, evs[i].events);
			}
		}
		run_due();
		run_again();
		bury();
	}
	while (links)
		link_close(links, false);
	bury();
	while (spare) {
		struct chunk *c = spare;
		spare = c->next;
		free(c);
	}
	free(heap);
	return 0;
}

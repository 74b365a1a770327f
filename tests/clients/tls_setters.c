/* tls_setters.c - a C TLS client printing what it can observe after its
 * handshake, step by step (from the HTTPS review of 2026-12-05, second:
 * docs/tls.md "Found by the second HTTPS review").
 * usage: tls_setters PORT CAFILE N [flags...]
 * noautoretry setvr resumeodd setshut keyupdate ignoreeof_after shut2
 * close_last (Connection: close on the last request) drain_last (its
 * answer read to the connection's end) quiet_after
 * (SSL_set_quiet_shutdown after the handshake; quiet_first, readahead_first:
 * on the first request only) autoretry_after (SSL_clear_mode AUTO_RETRY
 * after the handshake) setfd_same (SSL_set_fd on its own socket again,
 * from the second request on) membio_after pair_after rbio_after (from
 * the second request on, its I/O moved after the handshake: moved())
 * ownbio (a blocking BIO of its own method on the socket)
 * flags (env-ish words): hup=PIDFILE (SIGHUP that pid between requests),
 *   sleep=MS between requests, implicit (no SSL_connect: SSL_write does
 *   the handshake), nb (non-blocking socket), vnone (SSL_VERIFY_NONE),
 *   sni=NAME, host=NAME (SSL_set1_host), close (Connection: close),
 *   errdump (print the whole error queue at each step)
 */
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <errno.h>
#include <time.h>

static int has(int argc, char **argv, const char *w, const char **val)
{
	size_t n = strlen(w);
	for (int i = 4; i < argc; i++)
		if (!strncmp(argv[i], w, n) && (argv[i][n] == 0 || argv[i][n] == '=')) {
			if (val)
				*val = argv[i][n] ? argv[i] + n + 1 : NULL;
			return 1;
		}
	return 0;
}

/* How long a wait took, coarsely: an answer the server gives at once
 * ("under 5 s", however the machine is loaded) or a wait for its idle
 * close (a timing, not a count of clock seconds crossed) */
static const char *waited(struct timespec t0, struct timespec t1)
{
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	return s < 5.0 ? "under 5 s" : "5 s or more";
}

static void errq(const char *step)
{
	unsigned long e;
	int k = 0;
	char buf[256];
	while ((e = ERR_get_error())) {
		ERR_error_string_n(e, buf, sizeof buf);
		printf("  [%s] err queue: %s\n", step, buf);
		k++;
	}
	if (!k)
		printf("  [%s] err queue empty\n", step);
}

static void waitio(int fd, SSL *s, int r)
{
	int e = SSL_get_error(s, r);
	struct pollfd p = { fd, e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, 0 };
	poll(&p, 1, 5000);
}

/* ownbio: a blocking BIO of the program's own method on the socket (its
 * write a send, its read a recv) */
static int ob_write(BIO *b, const char *d, int n)
{
	ssize_t k = send((int)(intptr_t)BIO_get_data(b), d, n, MSG_NOSIGNAL);
	return k < 0 ? -1 : (int)k;
}
static int ob_read(BIO *b, char *d, int n)
{
	ssize_t k = recv((int)(intptr_t)BIO_get_data(b), d, n, 0);
	return k < 0 ? -1 : (int)k;
}
static long ob_ctrl(BIO *b, int cmd, long l, void *p)
{
	(void)b, (void)l, (void)p;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}
static BIO *own_bio(int fd)
{
	static BIO_METHOD *m;
	if (!m) {
		m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tls_setters own");
		BIO_meth_set_write(m, ob_write);
		BIO_meth_set_read(m, ob_read);
		BIO_meth_set_ctrl(m, ob_ctrl);
	}
	BIO *b = BIO_new(m);
	BIO_set_data(b, (void *)(intptr_t)fd);
	BIO_set_init(b, 1);
	return b;
}

/* membio_after, pair_after, rbio_after: the SSL's I/O moved after its
 * handshake (to memory BIOs, to one end of a socket pair, its read side
 * to a memory BIO): a request written, then a read */
static void moved(SSL *s, int fd, int argc, char **argv)
{
	const char req[] = "GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n";
	BIO *mr = BIO_new(BIO_s_mem()), *mw = NULL;
	int sv[2] = { -1, -1 };
	if (has(argc, argv, "membio_after", NULL)) {
		mw = BIO_new(BIO_s_mem());
		SSL_set_bio(s, mr, mw);
	} else if (has(argc, argv, "pair_after", NULL)) {
		BIO_free(mr);
		mr = NULL;
		socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
		printf("  set_fd(pair)=%d get_fd is the pair's %d\n", SSL_set_fd(s, sv[0]), SSL_get_fd(s) == sv[0]);
	} else {
		SSL_set0_rbio(s, mr);
		printf("  set0_rbio: get_fd is the socket's %d\n", SSL_get_wfd(s) == fd);
	}
	int r = SSL_write(s, req, sizeof req - 1);
	printf("  moved write=%d err=%d\n", r, r > 0 ? 0 : SSL_get_error(s, r));
	errq("moved write");
	if (mw)
		printf("  memory wbio holds %d bytes\n", (int)BIO_pending(mw));
	if (sv[1] >= 0) {
		char tmp[4096];
		ssize_t k = recv(sv[1], tmp, sizeof tmp, MSG_DONTWAIT);
		printf("  the pair's other end read %zd bytes, a record %d\n", k, k > 5 && tmp[0] == 23);
		shutdown(sv[1], SHUT_WR);
	}
	char buf[512];
	r = SSL_read(s, buf, sizeof buf);
	printf("  moved read=%d err=%d get_shutdown=%d\n", r, r > 0 ? 0 : SSL_get_error(s, r), SSL_get_shutdown(s));
	errq("moved read");
	r = SSL_shutdown(s);
	printf("  moved shutdown=%d err=%d get_shutdown=%d\n", r, SSL_get_error(s, r), SSL_get_shutdown(s));
	errq("moved shutdown");
	if (mw)
		printf("  memory wbio holds %d bytes\n", (int)BIO_pending(mw));
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
}

int main(int argc, char **argv)
{
	int port = atoi(argv[1]);
	const char *ca = argv[2];
	int n = atoi(argv[3]);
	const char *v;
	setvbuf(stdout, NULL, _IOLBF, 0);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, ca, NULL);
	SSL_CTX_set_verify(ctx, has(argc, argv, "vnone", NULL) ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
	if (has(argc, argv, "noautoretry", NULL))
		SSL_CTX_clear_mode(ctx, SSL_MODE_AUTO_RETRY);
	if (has(argc, argv, "noreneg", NULL))
		SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_SESSION *keep = NULL;
	for (int i = 0; i < n; i++) {
		if (i && has(argc, argv, "hup", &v)) {
			FILE *f = fopen(v, "r");
			int pid = 0;
			if (f && fscanf(f, "%d", &pid) == 1)
				kill(pid, SIGHUP);
			if (f)
				fclose(f);
			usleep(500000);
		}
		if (i && has(argc, argv, "sleep", &v))
			usleep(atoi(v) * 1000);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		if (connect(fd, (void *)&a, sizeof a)) {
			perror("connect");
			return 1;
		}
		int nb = has(argc, argv, "nb", NULL);
		if (nb)
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		SSL *s = SSL_new(ctx);
		if (has(argc, argv, "ownbio", NULL)) {
			BIO *b = own_bio(fd);
			SSL_set_bio(s, b, b);
		} else {
			SSL_set_fd(s, fd);
		}
		if ((has(argc, argv, "resume", NULL) || (has(argc, argv, "resumeodd", NULL) && i % 2 == 0)) && keep) {
			SSL_set_session(s, keep);
			SSL_SESSION_free(keep);
			keep = NULL;
		}
		SSL_set_tlsext_host_name(s, (char *)(has(argc, argv, "sni", &v) ? v : "localhost"));
		if (has(argc, argv, "host", &v))
			SSL_set1_host(s, v);
		else
			SSL_set1_host(s, "localhost");
		printf("req %d\n", i);
		int r;
		if (!has(argc, argv, "implicit", NULL)) {
			SSL_set_connect_state(s);
			while ((r = SSL_connect(s)) != 1) {
				int e = SSL_get_error(s, r);
				if (nb && (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)) {
					waitio(fd, s, r);
					continue;
				}
				printf("  connect r=%d err=%d\n", r, e);
				break;
			}
			printf("  connect=%d\n", r);
			errq("connect");
		} else {
			SSL_set_connect_state(s);
		}
		if (has(argc, argv, "connect2", NULL)) {
			int r2 = SSL_connect(s);
			int r3 = SSL_do_handshake(s);
			printf("  second SSL_connect=%d do_handshake=%d err=%d in_init=%d\n", r2, r3, SSL_get_error(s, r3), SSL_in_init(s));
			errq("connect2");
		}
		if (has(argc, argv, "autoretry_after", NULL))
			SSL_clear_mode(s, SSL_MODE_AUTO_RETRY);
		if (has(argc, argv, "setfd_same", NULL) && i > 0)
			printf("  set_fd(same)=%d\n", SSL_set_fd(s, fd));
		if (i > 0 && (has(argc, argv, "membio_after", NULL) || has(argc, argv, "pair_after", NULL) ||
			      has(argc, argv, "rbio_after", NULL))) {
			moved(s, fd, argc, argv);
			printf("req %d end\n", i);
			SSL_free(s);
			close(fd);
			continue;
		}
		if (has(argc, argv, "setvr", NULL) && i > 0) {
			SSL_set_verify_result(s, X509_V_ERR_CERT_REVOKED);
			printf("  set_verify_result(23): get=%ld\n", SSL_get_verify_result(s));
		}
		if (has(argc, argv, "ignoreeof_after", NULL))
			SSL_set_options(s, SSL_OP_IGNORE_UNEXPECTED_EOF);
		if (has(argc, argv, "quiet_after", NULL) || (has(argc, argv, "quiet_first", NULL) && i == 0))
			SSL_set_quiet_shutdown(s, 1);
		if (has(argc, argv, "readahead_first", NULL) && i == 0)
			SSL_set_read_ahead(s, 1);
		char req[256];
		const char *path = "/index.html";
		if (has(argc, argv, "path", &v))
			path = v;
		if (has(argc, argv, "ragged_last", NULL) && i == n - 1)
			path = "/ragged";
		int closing = has(argc, argv, "close", NULL) || (has(argc, argv, "close_last", NULL) && i == n - 1);
		snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: localhost\r\n%s%s\r\n",
			 has(argc, argv, "post", NULL) ? "POST" : "GET", path,
			 has(argc, argv, "post", NULL) ? "Content-Length: 0\r\n" : "",
			 closing ? "Connection: close\r\n" : "");
		if (has(argc, argv, "bigwrite", NULL) && i > 0) {
			/* a GET with an 8 MB body, non-blocking; after WANT_WRITE the
			 * retry passes the same bytes from another buffer */
			size_t blen = 8000000, off = 0;
			char *A = malloc(blen), *B = malloc(blen);
			memset(A, 'x', blen);
			int hl = snprintf(req, sizeof req, "GET /stall HTTP/1.1\r\nHost: localhost\r\nContent-Length: %zu\r\n\r\n", blen);
			SSL_write(s, req, hl);
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
			int wants = 0, moved = 0;
			char *cur = A;
			while (off < blen) {
				size_t chunk = blen - off < 65536 ? blen - off : 65536;
				r = SSL_write(s, cur + off, (int)chunk);
				if (r > 0) { off += r; cur = A; continue; }
				int e = SSL_get_error(s, r);
				if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
					wants++;
					memcpy(B, A, blen);
					cur = B; moved = 1; /* retry from a moved buffer */
					waitio(fd, s, r);
					continue;
				}
				printf("  bigwrite failed at %zu after %d wants (moved=%d): r=%d err=%d\n", off, wants, moved, r, e);
				errq("bigwrite");
				break;
			}
			if (off == blen)
				printf("  bigwrite done (wants>0: %d, moved: %d)\n", wants > 0, moved);
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
			free(A); free(B);
			printf("req %d end\n", i);
			SSL_free(s); close(fd);
			continue;
		}
		while ((r = SSL_write(s, req, strlen(req))) <= 0) {
			int e = SSL_get_error(s, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
				waitio(fd, s, r);
				continue;
			}
			printf("  write r=%d err=%d\n", r, e);
			break;
		}
		printf("  write=%d\n", r);
		errq("write");
		char buf[4096];
		int got = 0;
		for (;;) {
			r = SSL_read(s, buf + got, sizeof buf - 1 - got);
			if (r <= 0) {
				int e = SSL_get_error(s, r);
				if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
					if (!nb)
						printf("  read r=%d err=%d (blocking socket)\n", r, e);
					waitio(fd, s, r);
					continue;
				}
				printf("  read end r=%d err=%d\n", r, e);
				break;
			}
			got += r;
			buf[got] = 0;
			/* the answer's end: its head and Content-Length bytes (an
			 * answer without one is read to the connection's end) */
			char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "\r\ncontent-length:");
			if (end && cl && cl < end && got - (end + 4 - buf) >= atoi(cl + 17) &&
			    !(has(argc, argv, "drain_last", NULL) && i == n - 1))
				break;
			if (got > 3000)
				got = 0;
		}
		buf[got] = 0;
		char *eol = strstr(buf, "\r\n");
		if (eol)
			*eol = 0;
		printf("  status: %s\n", buf);
		errq("read");
		{
			STACK_OF(X509) *pc = SSL_get_peer_cert_chain(s);
			STACK_OF(X509) *vc = SSL_get0_verified_chain(s);
			X509 *pe = SSL_get1_peer_certificate(s);
			printf("  peer_chain=%d verified_chain=%d peer=%s\n", pc ? sk_X509_num(pc) : -1, vc ? sk_X509_num(vc) : -1, pe ? "yes" : "no");
			X509_free(pe);
		}
		if (has(argc, argv, "dump", NULL)) {
			char shared[2048] = "";
			SSL_get_shared_ciphers(s, shared, sizeof shared);
			STACK_OF(SSL_CIPHER) *cc = SSL_get_client_ciphers(s);
			EVP_PKEY *tk = NULL;
			int tkok = SSL_get_peer_tmp_key(s, &tk);
			int pnid = 0, ptnid = 0;
			SSL_get_peer_signature_nid(s, &pnid);
			SSL_get_peer_signature_type_nid(s, &ptnid);
			SSL_SESSION *se = SSL_get_session(s);
			printf("  dump: state=%s/%d in_init=%d want=%d rstate=%s extms=%ld secreneg=%ld shared=%zu client_ciphers=%d tmpkey=%d/%d sig=%d/%d servername_type=%d fd=%d rfd=%d opts=%llx mode=%lx\n",
			       SSL_state_string_long(s), SSL_get_state(s), SSL_in_init(s), SSL_want(s), SSL_rstate_string_long(s),
			       SSL_get_extms_support(s), SSL_get_secure_renegotiation_support(s), strlen(shared), cc ? sk_SSL_CIPHER_num(cc) : -1,
			       tkok, tk ? EVP_PKEY_get_id(tk) : 0, pnid, ptnid, SSL_get_servername_type(s), SSL_get_fd(s), SSL_get_rfd(s),
			       (unsigned long long)SSL_get_options(s), SSL_get_mode(s));
			EVP_PKEY_free(tk);
			if (se)
				printf("  dump sess: proto=%x host=%s resumable=%d maxfrag=%d alpn=%d master_key_len=%zu cipher=%s has_ticket=%d hint=%lu timeout=%ld time_is_recent=%d peer=%s\n",
				       SSL_SESSION_get_protocol_version(se), SSL_SESSION_get0_hostname(se) ? SSL_SESSION_get0_hostname(se) : "-",
				       SSL_SESSION_is_resumable(se), SSL_SESSION_get_max_fragment_length(se), 0,
				       (size_t)0 , SSL_CIPHER_get_name(SSL_SESSION_get0_cipher(se)),
				       SSL_SESSION_has_ticket(se), SSL_SESSION_get_ticket_lifetime_hint(se), SSL_SESSION_get_timeout(se),
				       labs(time(NULL) - SSL_SESSION_get_time(se)) < 2, SSL_SESSION_get0_peer(se) ? "yes" : "no");
		}
		const SSL_SESSION *ss = SSL_get_session(s);
		printf("  version=%s cipher=%s reused=%d verify=%ld group=%ld peername=%s sess_id_len=%u\n",
		       SSL_get_version(s), SSL_CIPHER_get_name(SSL_get_current_cipher(s)),
		       SSL_session_reused(s), SSL_get_verify_result(s),
		       (long)SSL_get_negotiated_group(s), SSL_get0_peername(s) ? SSL_get0_peername(s) : "-",
		       ss ? (unsigned)(SSL_SESSION_get_id(ss, NULL), ({unsigned l; SSL_SESSION_get_id(ss, &l); l;})) : 0);
		if (has(argc, argv, "readagain", NULL)) {
			usleep(1500000);
			char t2[512];
			int r2 = SSL_read(s, t2, sizeof t2);
			int e2 = SSL_get_error(s, r2);
			printf("  read again after 1.5 s: r=%d err=%d get_shutdown=%d pending=%d\n", r2, e2, SSL_get_shutdown(s), SSL_pending(s));
			errq("readagain");
		}
		if (has(argc, argv, "keyupdate", NULL)) {
			printf("  key_update=%d type=%d\n", SSL_key_update(s, SSL_KEY_UPDATE_REQUESTED), SSL_get_key_update_type(s));
			errq("keyupdate");
		}
		if (has(argc, argv, "setshut", NULL)) {
			SSL_set_shutdown(s, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
			printf("  after set_shutdown(3): get_shutdown=%d\n", SSL_get_shutdown(s));
		}
		if (has(argc, argv, "resume", NULL) || has(argc, argv, "resumeodd", NULL)) {
			if (keep)
				SSL_SESSION_free(keep);
			keep = SSL_get1_session(s);
		}
		r = SSL_shutdown(s);
		printf("  shutdown=%d get_shutdown=%d\n", r, SSL_get_shutdown(s));
		errq("shutdown");
		if (has(argc, argv, "bidi", NULL) && r == 0) {
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			char tmp[512];
			int rr = SSL_read(s, tmp, sizeof tmp);
			int e = SSL_get_error(s, rr);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			printf("  bidi read=%d err=%d get_shutdown=%d took %s\n", rr, e, SSL_get_shutdown(s),
			       waited(t0, t1));
			errq("bidi");
		}
		if (has(argc, argv, "shut2", NULL) && r == 0) {
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			int rr = SSL_shutdown(s);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			printf("  shutdown2=%d err=%d get_shutdown=%d took %s\n", rr, SSL_get_error(s, rr),
			       SSL_get_shutdown(s), waited(t0, t1));
			errq("shut2");
		}
		SSL_free(s);
		close(fd);
	}
	SSL_CTX_free(ctx);
	return 0;
}

/*
 * gnutls_server - an HTTPS server that OpenSSL cannot be: GnuTLS with a
 * priority string of the caller's (tests: "NORMAL:-VERS-TLS1.3:
 * %DISABLE_SAFE_RENEGOTIATION", a TLS 1.2 server without RFC 5746 secure
 * renegotiation, which OpenSSL 3 clients refuse unless told
 * SSL_OP_LEGACY_SERVER_CONNECT).  Keep-alive HTTP/1.1: every request is
 * answered "200" with its own URI as the body; a request with
 * "Connection: close" gets its answer, close_notify, and the end.
 * One process per connection.
 * Usage: gnutls_server CERT KEY PRIORITY PORT_FILE LOG [CA]
 * LOG: "<connection> <request line>" per request, before the answer.
 * CA: a client certificate from it is required.
 * Environment: KP_GNUTLS_REHANDSHAKE=1: before each answer, the server
 * asks to renegotiate (TLS 1.2 HelloRequest) and closes without an answer
 * if the client refuses; a client's own renegotiation is served always.
 * KP_GNUTLS_TICKET=1: a TLS 1.3 NewSessionTicket before each answer.
 * KP_GNUTLS_KEYUPDATE=1: TLS 1.3 KeyUpdates at awkward moments: one
 * asking the client's (update_requested) before each answer, and one not
 * asking between the two records each answer is sent in.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <gnutls/gnutls.h>

static gnutls_certificate_credentials_t cred;
static gnutls_priority_t prio;
static int require_cert, rehandshake, ticket, keyupdate;
static gnutls_datum_t ticket_key;

/* 0: done; < 0: failed (a refusal, a warning alert, anything) */
static int handshake(gnutls_session_t s)
{
	int r;
	do
		r = gnutls_handshake(s);
	while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
	return r;
}

static void serve(int fd, int id, const char *log)
{
	gnutls_session_t s;
	gnutls_init(&s, GNUTLS_SERVER);
	gnutls_priority_set(s, prio);
	gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
	gnutls_transport_set_int(s, fd);
	if (require_cert)
		gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
	if (ticket)
		gnutls_session_ticket_enable_server(s, &ticket_key);
	int r;
	do
		r = gnutls_handshake(s);
	while (r < 0 && !gnutls_error_is_fatal(r));
	if (r < 0)
		_exit(0);
	char buf[16384];
	size_t got = 0;
	for (;;) {
		char *end;
		while (!(end = memmem(buf, got, "\r\n\r\n", 4))) {
			if (got == sizeof(buf))
				_exit(0);
			ssize_t n = gnutls_record_recv(s, buf + got, sizeof(buf) - got);
			if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
				continue;
			if (n == GNUTLS_E_REHANDSHAKE) { /* the client's own */
				if (handshake(s) < 0)
					_exit(0);
				continue;
			}
			if (n <= 0)
				_exit(0);
			got += (size_t)n;
		}
		*end = 0;
		char *eol = strstr(buf, "\r\n");
		if (eol)
			*eol = 0;
		FILE *f = fopen(log, "a");
		if (f) {
			fprintf(f, "%d %s\n", id, buf);
			fclose(f);
		}
		char uri[1024] = "/";
		sscanf(buf, "%*s %1000s", uri);
		int close_it = eol && strcasestr(eol + 2, "connection: close") != NULL;
		if (rehandshake && (gnutls_rehandshake(s) < 0 || handshake(s) < 0)) {
			f = fopen(log, "a");
			if (f) {
				fprintf(f, "%d renegotiation refused\n", id);
				fclose(f);
			}
			_exit(0);
		}
		if (ticket)
			gnutls_session_ticket_send(s, 1, 0);
		char out[2048];
		int len = snprintf(out, sizeof out, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%s\r\n%s\n",
				   strlen(uri) + 1, close_it ? "Connection: close\r\n" : "", uri);
		if (keyupdate) {
			gnutls_session_key_update(s, GNUTLS_KU_PEER);
			gnutls_record_send(s, out, 5);
			gnutls_session_key_update(s, 0);
			gnutls_record_send(s, out + 5, (size_t)len - 5);
		} else {
			gnutls_record_send(s, out, (size_t)len);
		}
		size_t used = (size_t)(end + 4 - buf);
		memmove(buf, buf + used, got - used);
		got -= used;
		if (close_it) {
			gnutls_bye(s, GNUTLS_SHUT_WR);
			_exit(0);
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: gnutls_server CERT KEY PRIORITY PORT_FILE LOG\n");
		return 2;
	}
	signal(SIGCHLD, SIG_IGN);
	gnutls_global_init();
	rehandshake = getenv("KP_GNUTLS_REHANDSHAKE") != NULL;
	ticket = getenv("KP_GNUTLS_TICKET") != NULL;
	keyupdate = getenv("KP_GNUTLS_KEYUPDATE") != NULL;
	if (ticket)
		gnutls_session_ticket_key_generate(&ticket_key);
	gnutls_certificate_allocate_credentials(&cred);
	if (gnutls_certificate_set_x509_key_file(cred, argv[1], argv[2], GNUTLS_X509_FMT_PEM) < 0 ||
	    gnutls_priority_init(&prio, argv[3], NULL) < 0) {
		fprintf(stderr, "gnutls_server: bad certificate, key or priority\n");
		return 1;
	}
	if (argc > 6) {
		if (gnutls_certificate_set_x509_trust_file(cred, argv[6], GNUTLS_X509_FMT_PEM) <= 0) {
			fprintf(stderr, "gnutls_server: bad CA %s\n", argv[6]);
			return 1;
		}
		require_cert = 1;
	}
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	socklen_t alen = sizeof(a);
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 64) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &alen) < 0) {
		perror("gnutls_server");
		return 1;
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[4]);
	FILE *pf = fopen(tmp, "w");
	if (!pf)
		return 1;
	fprintf(pf, "%d\n", ntohs(a.sin_port));
	fclose(pf);
	rename(tmp, argv[4]);
	for (int id = 1;; id++) {
		int fd = accept(ls, NULL, NULL);
		if (fd < 0)
			continue;
		if (fork() == 0) {
			close(ls);
			serve(fd, id, argv[5]);
		}
		close(fd);
	}
}

/*
 * tls_unread.c - settings no getter reads back, and a session libssl's
 * client would not offer: three connections in one process, each a GET of
 * /f, what the program sees printed.
 *
 *   tls_unread MODE PORT CA_FILE [SECONDS]
 *
 * secret      TLS 1.2, SSL_OP_NO_RENEGOTIATION: the first connection's
 *             session resumed by the second (kept open: the server is
 *             seen resuming), then offered by the third with a session
 *             secret callback that refuses (libssl fails that handshake)
 * secret-all  every connection with that callback, no session of its own
 *             (libssl calls it only for a session offered with a ticket)
 * msg, ctx-msg  a message callback set with SSL_callback_ctrl (on each
 *             SSL, or once on the context): the messages it was told of
 * stale       TLS 1.3: the first connection's session resumed by the
 *             second (kept open), offered again by the third SECONDS
 *             later, past its ticket's lifetime (libssl offers it not;
 *             a server with a short session timeout)
 */
#include <stdbool.h>
#include <unistd.h>

#include "tls_common.h"

static int secret_calls, msgs;

static int secret_refused(SSL *s, void *secret, int *len, STACK_OF(SSL_CIPHER) *peer,
			  const SSL_CIPHER **cipher, void *arg)
{
	(void)s, (void)secret, (void)len, (void)peer, (void)cipher, (void)arg;
	secret_calls++;
	return 0;
}

static void msg_seen(int write_p, int version, int type, const void *buf, size_t len, SSL *ssl, void *arg)
{
	(void)write_p, (void)version, (void)type, (void)buf, (void)len, (void)ssl, (void)arg;
	msgs++;
}

/* Connection i: offer (NULL: none), the mode's settings; its outcome and
 * answer printed; kept open (returned) or closed (NULL). */
static SSL *round_trip(const char *mode, int i, SSL_CTX *ctx, int port, SSL_SESSION *offer, bool keep,
		       SSL_SESSION **save)
{
	SSL *ssl = tls_new(ctx, port);
	if (offer)
		SSL_set_session(ssl, offer);
	if (!strcmp(mode, "secret-all") || (!strcmp(mode, "secret") && i == 3))
		SSL_set_session_secret_cb(ssl, secret_refused, NULL);
	if (!strcmp(mode, "msg"))
		SSL_callback_ctrl(ssl, SSL_CTRL_SET_MSG_CALLBACK, (void (*)(void))msg_seen);
	msgs = 0;
	ERR_clear_error();
	int r = SSL_connect(ssl);
	if (r != 1) {
		printf("%d handshake failed: %s; secret callback %d\n", i, reason(), secret_calls);
		int fd = SSL_get_fd(ssl);
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	STACK_OF(X509) *chain = SSL_get0_verified_chain(ssl);
	printf("%d %s reused %d, verified chain %d, secret callback %d, messages %s\n", i, SSL_get_version(ssl),
	       SSL_session_reused(ssl), chain ? sk_X509_num(chain) : -1, secret_calls,
	       msgs ? "seen" : "none");
	static char resp[1 << 14];
	size_t got;
	char *body = tls_get_f(ssl, resp, sizeof(resp), &got);
	printf("%d body %ld\n", i, body ? (long)(got - (size_t)(body - resp)) : -1L);
	if (save)
		*save = SSL_get1_session(ssl);
	if (keep)
		return ssl;
	tls_close(ssl);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: tls_unread MODE PORT CA_FILE [SECONDS]\n");
		return 2;
	}
	const char *mode = argv[1];
	int port = atoi(argv[2]);
	setvbuf(stdout, NULL, _IONBF, 0);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (!SSL_CTX_load_verify_locations(ctx, argv[3], NULL))
		return 2;
	if (!strcmp(mode, "secret"))
		SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	if (!strcmp(mode, "ctx-msg"))
		SSL_CTX_callback_ctrl(ctx, SSL_CTRL_SET_MSG_CALLBACK, (void (*)(void))msg_seen);
	bool own = !strcmp(mode, "secret") || !strcmp(mode, "stale");
	SSL_SESSION *first = NULL;
	round_trip(mode, 1, ctx, port, NULL, false, own ? &first : NULL);
	SSL *kept = round_trip(mode, 2, ctx, port, first, own, NULL);
	if (!strcmp(mode, "stale") && argc > 4)
		sleep((unsigned)atoi(argv[4]));
	round_trip(mode, 3, ctx, port, first, false, NULL);
	if (kept)
		tls_close(kept);
	if (first)
		SSL_SESSION_free(first);
	SSL_CTX_free(ctx);
	return 0;
}

/*
 * tls_getters.c PORT CAFILE N [FLAGS...] - N HTTPS requests, one
 * connection and SSL each (one context, the peer verified, renegotiation
 * refused), each read to its end; after each it prints what the getters
 * that read the handshake's messages answer: the peer's chain, the CA
 * names of its CertificateRequest (SSL_get_client_CA_list,
 * SSL_get0_peer_CA_list), its signature algorithms (SSL_get_sigalgs, and
 * SSL_get_shared_sigalgs), the certificate types asked for, the peer's
 * and the client's own signature.  A full handshake shows them, a
 * resumption does not (docs/tls.md "What a full handshake shows").
 *
 * FLAGS: cert=PEM:KEY (a client certificate, sent when the server asks),
 * ownsess (each request offers the session of the one before: the
 * program's own resumption; ownsess=first: the first request's), hold=K (request K's SSL and socket stay open
 * until the end: the next request finds no pooled connection), early (the
 * getters also read right after SSL_connect, before the request: a
 * handed-out SSL's first calls come before its first read or write),
 * keyupdate (SSL_key_update asking the server's, before the request; its
 * return printed), renego (SSL_renegotiate before the request, its return
 * and reason printed), late (after the request: SSL_renegotiate and
 * SSL_verify_client_post_handshake, their returns and reasons printed),
 * lateku[=0] (after the request: SSL_key_update asking the server's, or
 * not (=0), then
 * SSL_do_handshake, what each returns and the key update's type and
 * SSL_in_init around them printed).
 */
#include <stdbool.h>
#include <unistd.h>

#include "tls_common.h"

static int argc_;
static char **argv_;

static const char *flag(const char *name)
{
	size_t n = strlen(name);
	for (int i = 4; i < argc_; i++)
		if (!strncmp(argv_[i], name, n) && (argv_[i][n] == 0 || argv_[i][n] == '='))
			return argv_[i][n] ? argv_[i] + n + 1 : "";
	return NULL;
}

static void names(const char *what, const STACK_OF(X509_NAME) *s)
{
	printf("  %s %d", what, s ? sk_X509_NAME_num(s) : -1);
	for (int i = 0; s && i < sk_X509_NAME_num(s); i++) {
		char b[200];
		X509_NAME_oneline(sk_X509_NAME_value(s, i), b, sizeof(b));
		printf(" [%s]", b);
	}
	printf("\n");
}

static void sigalgs(const char *what, SSL *ssl, bool shared)
{
	int sign = 0, hash = 0, sh = 0;
	unsigned char rs = 0, rh = 0;
	int all = shared ? SSL_get_shared_sigalgs(ssl, -1, NULL, NULL, NULL, NULL, NULL)
			 : SSL_get_sigalgs(ssl, -1, NULL, NULL, NULL, NULL, NULL);
	int n = shared ? SSL_get_shared_sigalgs(ssl, 0, &sign, &hash, &sh, &rs, &rh)
		       : SSL_get_sigalgs(ssl, 0, &sign, &hash, &sh, &rs, &rh);
	printf("  %s count(-1)=%d count(0)=%d first=%d/%d/%d/%02x%02x", what, all, n, sign, hash, sh, rh, rs);
	if (n > 1) {
		shared ? SSL_get_shared_sigalgs(ssl, n - 1, &sign, &hash, &sh, &rs, &rh)
		       : SSL_get_sigalgs(ssl, n - 1, &sign, &hash, &sh, &rs, &rh);
		printf(" last=%d/%d/%d/%02x%02x", sign, hash, sh, rh, rs);
	}
	printf(" past=%d\n", shared ? SSL_get_shared_sigalgs(ssl, n, NULL, NULL, NULL, NULL, NULL)
				    : SSL_get_sigalgs(ssl, n, NULL, NULL, NULL, NULL, NULL));
}

static void show(SSL *ssl)
{
	printf("  reused %d version %s\n", SSL_session_reused(ssl), SSL_get_version(ssl));
	STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl);
	printf("  peer chain %d", chain ? sk_X509_num(chain) : -1);
	for (int i = 0; chain && i < sk_X509_num(chain); i++) {
		char b[200];
		X509_NAME_oneline(X509_get_subject_name(sk_X509_value(chain, i)), b, sizeof(b));
		printf(" [%s]", b);
	}
	printf("\n");
	names("client CA list", SSL_get_client_CA_list(ssl));
	names("peer CA list", SSL_get0_peer_CA_list(ssl));
	sigalgs("peer sigalgs", ssl, false);
	sigalgs("shared sigalgs", ssl, true);
	const unsigned char *ct = (const unsigned char *)"unset";
	int nct = (int)SSL_get0_certificate_types(ssl, &ct);
	printf("  certificate types %d %s", nct, !ct ? "NULL" : ct == (const unsigned char *)"unset" ? "unset" : "set");
	for (int i = 0; i < nct && ct; i++)
		printf(" %d", ct[i]);
	printf("\n");
	const unsigned char *pf = (const unsigned char *)"unset";
	int npf = (int)SSL_get0_ec_point_formats(ssl, &pf);
	printf("  ec point formats %d %s", npf, !pf ? "NULL" : pf == (const unsigned char *)"unset" ? "unset" : "set");
	for (int i = 0; i < npf && pf; i++)
		printf(" %d", pf[i]);
	printf("\n");
	int a = 0, b = 0, c = 0, d = 0;
	int ra = SSL_get_peer_signature_type_nid(ssl, &a), rb = (int)SSL_get_peer_signature_nid(ssl, &b);
	int rc = SSL_get_signature_type_nid(ssl, &c), rd = (int)SSL_get_signature_nid(ssl, &d);
	printf("  peer signature %d:%d hash %d:%d; own signature %d:%d hash %d:%d\n", ra, a, rb, b, rc, c, rd, d);
	EVP_PKEY *pk = NULL, *own = NULL;
	long rp = SSL_get_peer_tmp_key(ssl, &pk), ro = SSL_get_tmp_key(ssl, &own);
	printf("  peer key %ld:%d own key %ld:%d group %d shared %ld extms %ld ri %ld\n", rp, pk ? EVP_PKEY_get_id(pk) : 0,
	       ro, own ? EVP_PKEY_get_id(own) : 0, (int)SSL_get_negotiated_group(ssl), SSL_get_shared_group(ssl, 0),
	       SSL_get_extms_support(ssl), SSL_get_secure_renegotiation_support(ssl));
	EVP_PKEY_free(pk);
	EVP_PKEY_free(own);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: tls_getters PORT CAFILE N [FLAGS...]\n");
		return 2;
	}
	argc_ = argc, argv_ = argv;
	int port = atoi(argv[1]), n = atoi(argv[3]);
	const char *hold = flag("hold"), *cert = flag("cert");
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	if (cert) {
		char pem[512];
		snprintf(pem, sizeof(pem), "%s", cert);
		char *key = strchr(pem, ':');
		if (!key)
			return 2;
		*key++ = 0;
		if (SSL_CTX_use_certificate_file(ctx, pem, SSL_FILETYPE_PEM) != 1 ||
		    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
			fprintf(stderr, "client certificate: %s\n", reason());
			return 2;
		}
	}
	SSL_SESSION *last = NULL;
	const char *own = flag("ownsess");
	bool first_only = own && !strcmp(own, "first");
	SSL *held = NULL;
	for (int i = 1; i <= n; i++) {
		SSL *ssl = tls_new(ctx, port);
		if (last && own)
			SSL_set_session(ssl, last);
		if (SSL_connect(ssl) != 1) {
			printf("%d: connect failed: %s\n", i, reason());
			return 1;
		}
		if (flag("early")) {
			printf("%d: before the request\n", i);
			show(ssl);
		}
		if (flag("keyupdate")) {
			int ku = SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED);
			printf("%d: key update %d type %d\n", i, ku, SSL_get_key_update_type(ssl));
			ERR_clear_error();
		}
		if (flag("renego")) {
			int rn = SSL_renegotiate(ssl);
			printf("%d: renegotiate %d %s pending %d\n", i, rn, rn ? "-" : reason(), SSL_renegotiate_pending(ssl));
			ERR_clear_error();
		}
		char resp[65536];
		size_t got;
		char *body = tls_get_f(ssl, resp, sizeof(resp), &got);
		printf("%d: %s\n", i, body ? "answered" : "no answer");
		show(ssl);
		if (flag("late")) {
			ERR_clear_error();
			int rn = SSL_renegotiate(ssl);
			printf("%d: late renegotiate %d %s pending %d", i, rn, rn ? "-" : reason(),
			       SSL_renegotiate_pending(ssl));
			ERR_clear_error();
			int pha = SSL_verify_client_post_handshake(ssl);
			printf(" post-handshake auth %d %s\n", pha, pha ? "-" : reason());
			ERR_clear_error();
		}
		if (flag("lateku")) {
			/* SSL_key_update after the request (lateku=0: not asking
			 * the server's; else asking it): pending until
			 * SSL_do_handshake sends it */
			ERR_clear_error();
			int ku = SSL_key_update(ssl, strcmp(flag("lateku"), "0") ? SSL_KEY_UPDATE_REQUESTED
										: SSL_KEY_UPDATE_NOT_REQUESTED);
			printf("%d: late key update %d type %d in init %d finished %d", i, ku,
			       SSL_get_key_update_type(ssl), SSL_in_init(ssl), SSL_is_init_finished(ssl));
			int hs = SSL_do_handshake(ssl);
			printf(" handshake %d type %d in init %d\n", hs, SSL_get_key_update_type(ssl), SSL_in_init(ssl));
			ERR_clear_error();
		}
		if (!last || !first_only) {
			if (last)
				SSL_SESSION_free(last);
			last = SSL_get1_session(ssl);
		}
		if (hold && atoi(hold) == i) {
			held = ssl;
			continue;
		}
		tls_close(ssl);
	}
	if (held)
		tls_close(held);
	if (last)
		SSL_SESSION_free(last);
	SSL_CTX_free(ctx);
	return 0;
}

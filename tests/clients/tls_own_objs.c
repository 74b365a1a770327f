/*
 * tls_own_objs.c - N requests, each on a new SSL and connection, that read
 * the objects a program may change, up_ref or tag with ex_data and change
 * them, as a program may: the CA names its peer sent
 * (SSL_get_client_CA_list, a writable stack, and SSL_get0_peer_CA_list),
 * the peer's and its own key exchange keys (SSL_get_peer_tmp_key,
 * SSL_get_tmp_key); and the OCSP responder ids it set itself
 * (SSL_get_tlsext_status_ids).  Alone every request reads its own
 * handshake's: the server's one name, keys no request saw before, no
 * tag, its own ids.
 *
 * usage: tls_own_objs N PORT TLSDIR [norenegotiation] (TLSDIR/ca.pem verifies
 * the server; norenegotiation: SSL_OP_NO_RENEGOTIATION)
 */
#include <stdbool.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/ocsp.h>
#include <openssl/x509.h>

#include "tls_common.h"

#define MAX_REQ 16

static int key_idx;
static EVP_PKEY *seen[2 * MAX_REQ];
static int n_seen;
static char tags[2 * MAX_REQ][32];

static void names(int i, STACK_OF(X509_NAME) *ca, const STACK_OF(X509_NAME) *ca0)
{
	printf("%d CA names:", i);
	if (!ca)
		printf(" none");
	for (int k = 0; ca && k < sk_X509_NAME_num(ca); k++) {
		char b[256];
		X509_NAME_oneline(sk_X509_NAME_value(ca, k), b, sizeof b);
		printf(" [%s]", b);
	}
	printf(", the peer's list the same %s\n", ca == ca0 ? "yes" : "no");
	if (ca) {
		/* the program adds one to what it was handed */
		X509_NAME *n = X509_NAME_new();
		X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"added by a request", -1,
					   -1, 0);
		sk_X509_NAME_push(ca, n);
	}
}

static void key(int i, const char *what, long r, EVP_PKEY *k)
{
	bool before = false;
	for (int j = 0; j < n_seen; j++)
		before |= seen[j] == k;
	const char *t = k ? EVP_PKEY_get_ex_data(k, key_idx) : NULL;
	printf("%d %s key: %ld, bits %d, one seen before %s, tag %s\n", i, what, r, k ? EVP_PKEY_get_bits(k) : -1,
	       before ? "yes" : "no", t ? t : "(none)");
	if (k && n_seen < 2 * MAX_REQ) {
		/* kept (its address never reused), tagged */
		snprintf(tags[n_seen], sizeof tags[n_seen], "request %d", i);
		EVP_PKEY_set_ex_data(k, key_idx, tags[n_seen]);
		seen[n_seen++] = k;
	} else if (k) {
		EVP_PKEY_free(k);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 4) {
		fprintf(stderr, "usage: tls_own_objs N PORT TLSDIR [norenegotiation]\n");
		return 2;
	}
	int n = atoi(argv[1]), port = atoi(argv[2]);
	char ca[4096];
	snprintf(ca, sizeof ca, "%s/ca.pem", argv[3]);
	key_idx = EVP_PKEY_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, ca, NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (argc > 4 && !strcmp(argv[4], "norenegotiation"))
		SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION); /* (TLS 1.2 hand-outs) */
	for (int i = 1; i <= n && i <= MAX_REQ; i++) {
		SSL *ssl = tls_new(ctx, port);
		/* an OCSP request setting of its own (no status type asked) */
		STACK_OF(OCSP_RESPID) *ids = sk_OCSP_RESPID_new_null();
		SSL_set_tlsext_status_ids(ssl, ids);
		if (SSL_connect(ssl) != 1) {
			printf("%d connect fail %s\n", i, reason());
			return 1;
		}
		char resp[65536];
		size_t got;
		printf("%d %s\n", i, tls_get_f(ssl, resp, sizeof resp, &got) ? "ok" : "fail");
		names(i, SSL_get_client_CA_list(ssl), SSL_get0_peer_CA_list(ssl));
		EVP_PKEY *k = NULL;
		long r = SSL_get_peer_tmp_key(ssl, &k);
		key(i, "peer's", r, k);
		k = NULL;
		r = SSL_get_tmp_key(ssl, &k);
		key(i, "own", r, k);
		STACK_OF(OCSP_RESPID) *got_ids = NULL;
		SSL_get_tlsext_status_ids(ssl, &got_ids);
		printf("%d OCSP ids: the ones it set %s\n", i, got_ids == ids ? "yes" : "no");
		tls_close(ssl);
	}
	for (int j = 0; j < n_seen; j++)
		EVP_PKEY_free(seen[j]);
	SSL_CTX_free(ctx);
	return 0;
}

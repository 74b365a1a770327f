/*
 * tls_pair.h - what the record layer's and the foreign engine's tests
 * (test_tls_record.c, test_tls_foreign.c) share to put a real OpenSSL
 * client and server face to face in process: the servers' self-signed
 * keys and certificates, memory BIOs that say "retry" when empty, and the
 * client's TLS 1.3 secrets read from its keylog lines.
 */
#ifndef KEEPALIVE_TLS_PAIR_H
#define KEEPALIVE_TLS_PAIR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* P-256 for the ECDSA suites, RSA for TLS 1.2's ECDHE-RSA ones (TLS 1.3
 * takes either); made by pair_make_certs, freed by pair_free_certs */
static EVP_PKEY *ec_key, *rsa_key;
static X509 *ec_cert, *rsa_cert;

static X509 *pair_self_signed(EVP_PKEY *pkey)
{
	X509 *cert = X509_new();
	if (!pkey || !cert)
		abort();
	X509_set_version(cert, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
	X509_gmtime_adj(X509_getm_notBefore(cert), -60);
	X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
	X509_NAME *name = X509_get_subject_name(cert);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
	X509_set_issuer_name(cert, name);
	X509_set_pubkey(cert, pkey);
	if (!X509_sign(cert, pkey, EVP_sha256()))
		abort();
	return cert;
}

static void pair_make_certs(void)
{
	ec_key = EVP_EC_gen("P-256");
	ec_cert = pair_self_signed(ec_key);
	rsa_key = EVP_RSA_gen(2048);
	rsa_cert = pair_self_signed(rsa_key);
}

static void pair_free_certs(void)
{
	X509_free(ec_cert);
	EVP_PKEY_free(ec_key);
	X509_free(rsa_cert);
	EVP_PKEY_free(rsa_key);
}

static BIO *mem_bio(void)
{
	BIO *b = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(b, -1); /* empty: retry, not EOF */
	return b;
}

/* the client's TLS 1.3 secrets, from its keylog lines (keylog, set on its
 * context; the lengths zeroed before each handshake) */
static uint8_t k_client[48], k_server[48], k_exporter[48];
static size_t k_client_len, k_server_len, k_exporter_len;

static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = 0;
	while (s[0] && s[1] && s[0] != ' ' && n < cap) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

static void keylog(const SSL *ssl, const char *line)
{
	(void)ssl;
	const char *secret = strrchr(line, ' ');
	if (!secret)
		return;
	if (!strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24))
		k_client_len = unhex(secret + 1, k_client, sizeof(k_client));
	else if (!strncmp(line, "SERVER_TRAFFIC_SECRET_0 ", 24))
		k_server_len = unhex(secret + 1, k_server, sizeof(k_server));
	else if (!strncmp(line, "EXPORTER_SECRET ", 16))
		k_exporter_len = unhex(secret + 1, k_exporter, sizeof(k_exporter));
}

#endif

/* tls_crypto.h - the libcrypto functions of the record layer, the export
 * message and the foreign engine (tls_record.c, tls_export.c,
 * tls_foreign.c), reached through a table (docs/tls-across.md "Linking").
 *
 * The library must not link libcrypto (a program without TLS never loads
 * it): these files call libcrypto by its names, and this header, included
 * by them only and after OpenSSL's headers, turns each name into a field
 * of tlsrec_crypto.  The library fills the table where it binds libssl
 * (tls_real.c, from the copy the program loaded); the unit tests and
 * fuzzers fill it from the libcrypto they link (tests/unit/crypto_direct.c).
 * An unfilled table is never called: nothing reaches these files before
 * the library's TLS layer is bound. */
#ifndef KP_TLS_CRYPTO_H
#define KP_TLS_CRYPTO_H

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

/* X(name): every libcrypto function the three files call */
#define KP_RECORD_CRYPTO_FUNCS(X)                                                \
	X(EVP_CIPHER_CTX_ctrl)                                                     \
	X(EVP_CIPHER_CTX_free)                                                     \
	X(EVP_CIPHER_CTX_new)                                                      \
	X(EVP_CipherFinal_ex)                                                      \
	X(EVP_CipherInit_ex)                                                       \
	X(EVP_CipherUpdate)                                                        \
	X(EVP_Digest)                                                              \
	X(EVP_KDF_CTX_free)                                                        \
	X(EVP_KDF_CTX_new)                                                         \
	X(EVP_KDF_derive)                                                          \
	X(EVP_KDF_fetch)                                                           \
	X(EVP_KDF_free)                                                            \
	X(EVP_MD_get0_name)                                                        \
	X(EVP_aes_128_gcm)                                                         \
	X(EVP_aes_256_gcm)                                                         \
	X(EVP_chacha20_poly1305)                                                   \
	X(EVP_sha256)                                                              \
	X(EVP_sha384)                                                              \
	X(OPENSSL_cleanse)                                                         \
	X(OSSL_PARAM_construct_end)                                                \
	X(OSSL_PARAM_construct_int)                                                \
	X(OSSL_PARAM_construct_octet_string)                                       \
	X(OSSL_PARAM_construct_utf8_string)

#define KP_RECORD_CRYPTO_FIELD(name) __typeof__(name) *name;
struct tlsrec_crypto_table {
	KP_RECORD_CRYPTO_FUNCS(KP_RECORD_CRYPTO_FIELD)
};
#undef KP_RECORD_CRYPTO_FIELD

/* defined in tls_record.c */
extern struct tlsrec_crypto_table tlsrec_crypto;

#ifndef KP_TLS_CRYPTO_NAMES
/* the names, in the three files, call through the table */
#define EVP_CIPHER_CTX_ctrl (*tlsrec_crypto.EVP_CIPHER_CTX_ctrl)
#define EVP_CIPHER_CTX_free (*tlsrec_crypto.EVP_CIPHER_CTX_free)
#define EVP_CIPHER_CTX_new (*tlsrec_crypto.EVP_CIPHER_CTX_new)
#define EVP_CipherFinal_ex (*tlsrec_crypto.EVP_CipherFinal_ex)
#define EVP_CipherInit_ex (*tlsrec_crypto.EVP_CipherInit_ex)
#define EVP_CipherUpdate (*tlsrec_crypto.EVP_CipherUpdate)
#define EVP_Digest (*tlsrec_crypto.EVP_Digest)
#define EVP_KDF_CTX_free (*tlsrec_crypto.EVP_KDF_CTX_free)
#define EVP_KDF_CTX_new (*tlsrec_crypto.EVP_KDF_CTX_new)
#define EVP_KDF_derive (*tlsrec_crypto.EVP_KDF_derive)
#define EVP_KDF_fetch (*tlsrec_crypto.EVP_KDF_fetch)
#define EVP_KDF_free (*tlsrec_crypto.EVP_KDF_free)
#define EVP_MD_get0_name (*tlsrec_crypto.EVP_MD_get0_name)
#define EVP_aes_128_gcm (*tlsrec_crypto.EVP_aes_128_gcm)
#define EVP_aes_256_gcm (*tlsrec_crypto.EVP_aes_256_gcm)
#define EVP_chacha20_poly1305 (*tlsrec_crypto.EVP_chacha20_poly1305)
#define EVP_sha256 (*tlsrec_crypto.EVP_sha256)
#define EVP_sha384 (*tlsrec_crypto.EVP_sha384)
#define OPENSSL_cleanse (*tlsrec_crypto.OPENSSL_cleanse)
#define OSSL_PARAM_construct_end (*tlsrec_crypto.OSSL_PARAM_construct_end)
#define OSSL_PARAM_construct_int (*tlsrec_crypto.OSSL_PARAM_construct_int)
#define OSSL_PARAM_construct_octet_string (*tlsrec_crypto.OSSL_PARAM_construct_octet_string)
#define OSSL_PARAM_construct_utf8_string (*tlsrec_crypto.OSSL_PARAM_construct_utf8_string)
#endif

#endif

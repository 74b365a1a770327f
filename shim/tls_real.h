/*
 * tls_real.h - the real libssl 3 / libcrypto 3 functions, bound lazily.
 *
 * The library is never linked against OpenSSL: a program that does not
 * load libssl pays nothing.  The first SSL_* call the program makes (it has
 * libssl loaded by then) binds this table with dlvsym(RTLD_NEXT, name,
 * "OPENSSL_3.0.0"), or from dlopen(..., RTLD_NOLOAD) when libssl was
 * loaded RTLD_LOCAL (CPython's _ssl module).  Every call the shim makes to
 * a function it wraps goes through kp_ssl, never through our wrappers;
 * libssl's own calls to its exports (through the PLT) are told apart by
 * the caller's address (kp_from_libssl) and pass straight through.
 */
#ifndef KEEPALIVE_TLS_REAL_H
#define KEEPALIVE_TLS_REAL_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

/* function pointer types libssl's getters return */
typedef void (*kp_info_cb)(const SSL *, int, int);
typedef int (*kp_client_cert_cb)(SSL *, X509 **, EVP_PKEY **);
typedef int (*kp_security_cb)(const SSL *, const SSL_CTX *, int, int, int, void *, void *);
typedef void (*kp_msg_cb)(int, int, int, const void *, size_t, SSL *, void *);
typedef size_t (*kp_padding_cb)(SSL *, int, size_t, void *);
typedef int (*kp_new_session_cb)(SSL *, SSL_SESSION *);
typedef void (*kp_keylog_cb)(const SSL *, const char *);
/* any function pointer a getter returns (compared with NULL only) */
typedef void (*kp_any_fn)(void);

/* X(return type, name, parameter list): libssl.  The wrapped functions
 * (hooks_tls.c) first, then helpers we only call. */
#define KP_SSL_FUNCS(X)                                                           \
	X(int, SSL_connect, (SSL *))                                               \
	X(int, SSL_do_handshake, (SSL *))                                          \
	X(void, SSL_free, (SSL *))                                                 \
	X(SSL *, SSL_new, (SSL_CTX *))                                             \
	X(int, SSL_clear, (SSL *))                                                 \
	X(void, SSL_set_connect_state, (SSL *))                                    \
	X(int, SSL_read, (SSL *, void *, int))                                     \
	X(int, SSL_read_ex, (SSL *, void *, size_t, size_t *))                     \
	X(int, SSL_peek, (SSL *, void *, int))                                     \
	X(int, SSL_peek_ex, (SSL *, void *, size_t, size_t *))                     \
	X(int, SSL_write, (SSL *, const void *, int))                              \
	X(int, SSL_write_ex, (SSL *, const void *, size_t, size_t *))              \
	X(int, SSL_pending, (const SSL *))                                         \
	X(int, SSL_has_pending, (const SSL *))                                     \
	X(int, SSL_get_error, (const SSL *, int))                                  \
	X(int, SSL_shutdown, (SSL *))                                              \
	X(int, SSL_get_shutdown, (const SSL *))                                    \
	X(long, SSL_get_verify_result, (const SSL *))                              \
	X(STACK_OF(X509) *, SSL_get0_verified_chain, (const SSL *))                \
	X(X509 *, SSL_get1_peer_certificate, (const SSL *))                        \
	X(X509 *, SSL_get0_peer_certificate, (const SSL *))                        \
	X(STACK_OF(X509) *, SSL_get_peer_cert_chain, (const SSL *))                \
	X(void, SSL_get0_alpn_selected, (const SSL *, const unsigned char **, unsigned int *)) \
	X(void, SSL_get0_next_proto_negotiated, (const SSL *, const unsigned char **, unsigned *)) \
	X(SSL_SESSION *, SSL_get_session, (const SSL *))                           \
	X(SSL_SESSION *, SSL_get1_session, (SSL *))                                \
	X(int, SSL_session_reused, (const SSL *))                                  \
	X(const SSL_CIPHER *, SSL_get_current_cipher, (const SSL *))               \
	X(const SSL_CIPHER *, SSL_get_pending_cipher, (const SSL *))               \
	X(const COMP_METHOD *, SSL_get_current_compression, (const SSL *))         \
	X(const COMP_METHOD *, SSL_get_current_expansion, (const SSL *))           \
	X(STACK_OF(SSL_CIPHER) *, SSL_get_client_ciphers, (const SSL *))           \
	X(STACK_OF(X509_NAME) *, SSL_get_client_CA_list, (const SSL *))            \
	X(const STACK_OF(X509_NAME) *, SSL_get0_peer_CA_list, (const SSL *))       \
	X(size_t, SSL_get_finished, (const SSL *, void *, size_t))                 \
	X(size_t, SSL_get_peer_finished, (const SSL *, void *, size_t))            \
	X(const char *, SSL_get_version, (const SSL *))                            \
	X(int, SSL_version, (const SSL *))                                         \
	X(int, SSL_client_version, (const SSL *))                                  \
	X(int, SSL_is_init_finished, (const SSL *))                                \
	X(int, SSL_in_init, (const SSL *))                                         \
	X(int, SSL_in_before, (const SSL *))                                       \
	X(OSSL_HANDSHAKE_STATE, SSL_get_state, (const SSL *))                      \
	X(const char *, SSL_state_string, (const SSL *))                           \
	X(const char *, SSL_state_string_long, (const SSL *))                      \
	X(const char *, SSL_get_servername, (const SSL *, const int))              \
	X(int, SSL_get_servername_type, (const SSL *))                             \
	X(long, SSL_ctrl, (SSL *, int, long, void *))                              \
	X(char *, SSL_get_shared_ciphers, (const SSL *, char *, int))              \
	X(size_t, SSL_get_client_random, (const SSL *, unsigned char *, size_t))   \
	X(size_t, SSL_get_server_random, (const SSL *, unsigned char *, size_t))   \
	X(int, SSL_export_keying_material, (SSL *, unsigned char *, size_t, const char *, \
					    size_t, const unsigned char *, size_t, int)) \
	X(int, SSL_get_peer_signature_type_nid, (const SSL *, int *))              \
	X(int, SSL_verify_client_post_handshake, (SSL *))                          \
	X(int, SSL_key_update, (SSL *, int))                                       \
	X(int, SSL_get_key_update_type, (const SSL *))                             \
	X(int, SSL_renegotiate, (SSL *))                                           \
	X(int, SSL_renegotiate_abbreviated, (SSL *))                               \
	X(int, SSL_renegotiate_pending, (const SSL *))                             \
	X(int, SSL_get_early_data_status, (const SSL *))                           \
	X(int, SSL_set_alpn_protos, (SSL *, const unsigned char *, unsigned int)) \
	X(int, SSL_CTX_set_alpn_protos, (SSL_CTX *, const unsigned char *, unsigned int)) \
	X(int, SSL_set_session_id_context, (SSL *, const unsigned char *, unsigned int)) \
	X(int, SSL_CTX_set_session_id_context, (SSL_CTX *, const unsigned char *, unsigned int)) \
	X(void, SSL_CTX_set_cert_verify_callback, (SSL_CTX *, int (*)(X509_STORE_CTX *, void *), \
						   void *))                          \
	X(SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *))                            \
	X(SSL_CTX *, SSL_CTX_new_ex, (OSSL_LIB_CTX *, const char *, const SSL_METHOD *)) \
	X(int, SSL_want, (const SSL *))                                            \
	X(int, SSL_get_shared_sigalgs, (SSL *, int, int *, int *, int *, unsigned char *, \
					unsigned char *))                            \
	X(int, SSL_get_sigalgs, (SSL *, int, int *, int *, int *, unsigned char *,  \
				 unsigned char *))                                   \
	X(const STACK_OF(SCT) *, SSL_get0_peer_scts, (SSL *))                      \
	X(int, SSL_get_signature_type_nid, (const SSL *, int *))                   \
	X(const char *, SSL_get0_peername, (SSL *))                                \
	X(int, SSL_dane_enable, (SSL *, const char *))                             \
	X(long, SSL_CTX_ctrl, (SSL_CTX *, int, long, void *))                      \
	X(void, SSL_CTX_set_cert_cb, (SSL_CTX *, int (*)(SSL *, void *), void *))  \
	X(void, SSL_set_cert_cb, (SSL *, int (*)(SSL *, void *), void *))          \
	X(void, SSL_CTX_set_post_handshake_auth, (SSL_CTX *, int))                 \
	X(void, SSL_set_post_handshake_auth, (SSL *, int))                         \
	X(void, SSL_CTX_set_next_proto_select_cb, (SSL_CTX *, SSL_CTX_npn_select_cb_func, void *)) \
	X(int, SSL_CTX_set_client_cert_engine, (SSL_CTX *, ENGINE *))              \
	X(long, SSL_callback_ctrl, (SSL *, int, void (*)(void)))                   \
	X(long, SSL_CTX_callback_ctrl, (SSL_CTX *, int, void (*)(void)))           \
	X(int, SSL_set_block_padding, (SSL *, size_t))                             \
	X(int, SSL_CTX_set_block_padding, (SSL_CTX *, size_t))                     \
	X(int, SSL_set_tlsext_max_fragment_length, (SSL *, uint8_t))               \
	X(int, SSL_CTX_set_tlsext_max_fragment_length, (SSL_CTX *, uint8_t))       \
	X(int, SSL_set_record_padding_callback, (SSL *, kp_padding_cb))            \
	X(void, SSL_CTX_set_record_padding_callback, (SSL_CTX *, kp_padding_cb))   \
	X(int, SSL_set_session_ticket_ext, (SSL *, void *, int))                   \
	X(int, SSL_set_session_ticket_ext_cb, (SSL *, tls_session_ticket_ext_cb_fn, void *)) \
	X(SSL_CTX *, SSL_set_SSL_CTX, (SSL *, SSL_CTX *))                          \
	/* helpers */                                                              \
	X(const SSL_METHOD *, SSL_get_ssl_method, (const SSL *))                   \
	X(unsigned long, OpenSSL_version_num, (void))                              \
	X(int, SSL_get_read_ahead, (const SSL *))                                  \
	X(int, SSL_get_quiet_shutdown, (const SSL *))                              \
	X(const STACK_OF(X509_NAME) *, SSL_get0_CA_list, (const SSL *))            \
	X(int, SSL_get_fd, (const SSL *))                                          \
	X(void, SSL_set_bio, (SSL *, BIO *, BIO *))                                \
	X(int, SSL_set_fd, (SSL *, int))                                           \
	X(int, SSL_set_rfd, (SSL *, int))                                          \
	X(int, SSL_set_wfd, (SSL *, int))                                          \
	X(void, SSL_set0_rbio, (SSL *, BIO *))                                     \
	X(void, SSL_set0_wbio, (SSL *, BIO *))                                     \
	X(BIO *, SSL_get_rbio, (const SSL *))                                      \
	X(SSL_CTX *, SSL_get_SSL_CTX, (const SSL *))                               \
	X(const SSL_METHOD *, TLS_client_method, (void))                           \
	X(int, SSL_set_ex_data, (SSL *, int, void *))                              \
	X(void, SSL_set_info_callback, (SSL *, void (*)(const SSL *, int, int)))   \
	X(void, SSL_CTX_set_info_callback, (SSL_CTX *, void (*)(const SSL *, int, int))) \
	X(void, SSL_set_msg_callback, (SSL *, void (*)(int, int, int, const void *, size_t, \
						      SSL *, void *)))              \
	X(void, SSL_set_verify, (SSL *, int, SSL_verify_cb))                       \
	X(int, SSL_get_verify_mode, (const SSL *))                                 \
	X(SSL_verify_cb, SSL_get_verify_callback, (const SSL *))                   \
	X(X509_VERIFY_PARAM *, SSL_get0_param, (SSL *))                            \
	X(X509_STORE *, SSL_CTX_get_cert_store, (const SSL_CTX *))                 \
	X(X509 *, SSL_get_certificate, (const SSL *))                              \
	X(STACK_OF(SSL_CIPHER) *, SSL_get_ciphers, (const SSL *))                  \
	X(uint64_t, SSL_get_options, (const SSL *))                                \
	X(uint32_t, SSL_CIPHER_get_id, (const SSL_CIPHER *))                       \
	X(int, SSL_get_ex_data_X509_STORE_CTX_idx, (void))                         \
	X(int, SSL_ct_is_enabled, (const SSL *))                                   \
	X(void, SSL_set_shutdown, (SSL *, int))                                    \
	X(void, SSL_set_verify_result, (SSL *, long))                              \
	X(void, SSL_set_quiet_shutdown, (SSL *, int))                              \
	X(void, SSL_set_read_ahead, (SSL *, int))                                  \
	X(uint64_t, SSL_set_options, (SSL *, uint64_t))                            \
	X(int, SSL_get_security_level, (const SSL *))                              \
	X(int, SSL_set_session, (SSL *, SSL_SESSION *))                            \
	X(int, SSL_SESSION_is_resumable, (const SSL_SESSION *))                    \
	X(int, SSL_CTX_remove_session, (SSL_CTX *, SSL_SESSION *))                 \
	X(int, SSL_CTX_add_session, (SSL_CTX *, SSL_SESSION *))                    \
	X(int, SSL_SESSION_has_ticket, (const SSL_SESSION *))                      \
	X(kp_new_session_cb, SSL_CTX_sess_get_new_cb, (SSL_CTX *))                 \
	X(void, SSL_CTX_sess_set_new_cb, (SSL_CTX *, kp_new_session_cb))           \
	X(int, SSL_SESSION_up_ref, (SSL_SESSION *))                                \
	X(void, SSL_SESSION_free, (SSL_SESSION *))                                 \
	X(int, SSL_SESSION_get_protocol_version, (const SSL_SESSION *))            \
	X(const SSL_CIPHER *, SSL_SESSION_get0_cipher, (const SSL_SESSION *))      \
	X(int, SSL_is_server, (const SSL *))                                       \
	X(int, SSL_copy_session_id, (SSL *, const SSL *))                          \
	X(SSL *, SSL_dup, (SSL *))                                                 \
	X(int, SSL_up_ref, (SSL *))                                                \
	X(EVP_PKEY *, SSL_get_privatekey, (const SSL *))                           \
	X(void, SSL_set_accept_state, (SSL *))                                     \
	X(int, SSL_set_ssl_method, (SSL *, const SSL_METHOD *))                    \
	X(int, SSL_stateless, (SSL *))                                             \
	X(const SSL_METHOD *, SSL_CTX_get_ssl_method, (const SSL_CTX *))           \
	X(int, SSL_CTX_add_client_custom_ext, (SSL_CTX *, unsigned int, custom_ext_add_cb, \
					       custom_ext_free_cb, void *,     \
					       custom_ext_parse_cb, void *))   \
	X(int, SSL_CTX_add_custom_ext, (SSL_CTX *, unsigned int, unsigned int,     \
					SSL_custom_ext_add_cb_ex, SSL_custom_ext_free_cb_ex, \
					void *, SSL_custom_ext_parse_cb_ex, void *)) \
	X(void, SSL_CTX_set_psk_client_callback, (SSL_CTX *, SSL_psk_client_cb_func)) \
	X(void, SSL_set_psk_client_callback, (SSL *, SSL_psk_client_cb_func))      \
	X(int, SSL_set_session_secret_cb, (SSL *, tls_session_secret_cb_fn, void *)) \
	X(void, SSL_CTX_set_psk_use_session_callback, (SSL_CTX *, SSL_psk_use_session_cb_func)) \
	X(void, SSL_set_psk_use_session_callback, (SSL *, SSL_psk_use_session_cb_func)) \
	X(void, SSL_CTX_set_msg_callback, (SSL_CTX *, kp_msg_cb))                  \
	X(BIO *, SSL_get_wbio, (const SSL *))                                      \
	X(void *, SSL_get_ex_data, (const SSL *, int))                             \
	X(uint64_t, SSL_clear_options, (SSL *, uint64_t))                          \
	X(int, SSL_CTX_up_ref, (SSL_CTX *))                                        \
	X(void, SSL_CTX_free, (SSL_CTX *))                                         \
	X(kp_info_cb, SSL_get_info_callback, (const SSL *))                        \
	X(kp_info_cb, SSL_CTX_get_info_callback, (SSL_CTX *))                      \
	X(kp_keylog_cb, SSL_CTX_get_keylog_callback, (const SSL_CTX *))            \
	X(kp_client_cert_cb, SSL_CTX_get_client_cert_cb, (SSL_CTX *))              \
	X(kp_security_cb, SSL_get_security_callback, (const SSL *))                \
	X(kp_security_cb, SSL_CTX_get_security_callback, (const SSL_CTX *))    \
	X(int, i2d_SSL_SESSION, (const SSL_SESSION *, unsigned char **))           \
	X(SSL_SESSION *, d2i_SSL_SESSION, (SSL_SESSION **, const unsigned char **, long)) \
	X(long, SSL_SESSION_get_timeout, (const SSL_SESSION *))                    \
	X(long, SSL_SESSION_get_time, (const SSL_SESSION *))                       \
	X(const unsigned char *, SSL_SESSION_get_id, (const SSL_SESSION *, unsigned int *)) \
	X(SSL_SESSION *, SSL_SESSION_dup, (const SSL_SESSION *))                   \
	X(X509 *, SSL_SESSION_get0_peer, (SSL_SESSION *))                          \
	X(long, SSL_SESSION_set_time, (SSL_SESSION *, long))                       \
	X(int, SSL_SESSION_set1_id, (SSL_SESSION *, const unsigned char *, unsigned int)) \
	X(int, SSL_SESSION_set1_id_context, (SSL_SESSION *, const unsigned char *, unsigned int)) \
	X(long, SSL_SESSION_set_timeout, (SSL_SESSION *, long))                    \
	X(int, SSL_SESSION_set_protocol_version, (SSL_SESSION *, int))             \
	X(int, SSL_SESSION_set1_hostname, (SSL_SESSION *, const char *))           \
	X(int, SSL_SESSION_set1_alpn_selected, (SSL_SESSION *, const unsigned char *, size_t)) \
	X(int, SSL_SESSION_set_cipher, (SSL_SESSION *, const SSL_CIPHER *))        \
	X(int, SSL_SESSION_set1_master_key, (SSL_SESSION *, const unsigned char *, size_t)) \
	X(int, SSL_SESSION_set_max_early_data, (SSL_SESSION *, uint32_t))          \
	X(int, SSL_SESSION_set1_ticket_appdata, (SSL_SESSION *, const void *, size_t)) \
	X(int, SSL_SESSION_set_ex_data, (SSL_SESSION *, int, void *))              \
	X(void *, SSL_SESSION_get_ex_data, (const SSL_SESSION *, int))             \
	X(long, SSL_CTX_get_timeout, (const SSL_CTX *))                            \
	X(void, SSL_CTX_set_keylog_callback, (SSL_CTX *, kp_keylog_cb))            \
	X(size_t, SSL_SESSION_get_master_key, (const SSL_SESSION *, unsigned char *, size_t)) \
	X(uint16_t, SSL_CIPHER_get_protocol_id, (const SSL_CIPHER *))

/* libcrypto */
#define KP_CRYPTO_FUNCS(X)                                                        \
	X(BIO *, BIO_new_socket, (int, int))                                       \
	X(BIO *, BIO_new, (const BIO_METHOD *))                                    \
	X(const BIO_METHOD *, BIO_s_mem, (void))                                   \
	X(int, BIO_write, (BIO *, const void *, int))                              \
	X(int, BIO_read, (BIO *, void *, int))                                     \
	X(int, BIO_test_flags, (const BIO *, int))                                 \
	X(void, BIO_set_flags, (BIO *, int))                                       \
	X(void, BIO_clear_flags, (BIO *, int))                                     \
	X(uint64_t, BIO_number_written, (BIO *))                                   \
	X(long, BIO_ctrl, (BIO *, int, long, void *))                              \
	X(int, BIO_up_ref, (BIO *))                                                \
	X(int, BIO_free, (BIO *))                                                  \
	X(void, ERR_new, (void))                                                   \
	X(void, ERR_set_error, (int, int, const char *, ...))                      \
	X(int, BIO_method_type, (const BIO *))                                     \
	X(const char *, BIO_method_name, (const BIO *))                            \
	X(long, BIO_int_ctrl, (BIO *, int, long, int))                             \
	X(X509_STORE_CTX *, X509_STORE_CTX_new, (void))                            \
	X(void, X509_STORE_CTX_free, (X509_STORE_CTX *))                           \
	X(int, X509_STORE_CTX_init, (X509_STORE_CTX *, X509_STORE *, X509 *, STACK_OF(X509) *)) \
	X(int, X509_STORE_CTX_set_ex_data, (X509_STORE_CTX *, int, void *))        \
	X(int, X509_STORE_CTX_set_default, (X509_STORE_CTX *, const char *))       \
	X(X509_VERIFY_PARAM *, X509_STORE_CTX_get0_param, (const X509_STORE_CTX *)) \
	X(void, X509_STORE_CTX_set_error, (X509_STORE_CTX *, int))                 \
	X(X509 *, X509_STORE_CTX_get0_cert, (const X509_STORE_CTX *))              \
	X(STACK_OF(X509) *, X509_STORE_CTX_get0_untrusted, (const X509_STORE_CTX *)) \
	X(void *, X509_STORE_CTX_get_ex_data, (const X509_STORE_CTX *, int))       \
	X(void, X509_STORE_CTX_set_verify_cb, (X509_STORE_CTX *, X509_STORE_CTX_verify_cb)) \
	X(int, X509_STORE_CTX_get_error, (const X509_STORE_CTX *))                 \
	X(STACK_OF(X509) *, X509_STORE_CTX_get1_chain, (const X509_STORE_CTX *))   \
	X(int, X509_VERIFY_PARAM_set1, (X509_VERIFY_PARAM *, const X509_VERIFY_PARAM *)) \
	X(void, X509_VERIFY_PARAM_set_auth_level, (X509_VERIFY_PARAM *, int))      \
	X(char *, X509_VERIFY_PARAM_get0_peername, (const X509_VERIFY_PARAM *))    \
	X(void, X509_VERIFY_PARAM_move_peername, (X509_VERIFY_PARAM *, X509_VERIFY_PARAM *)) \
	X(X509_VERIFY_PARAM *, X509_VERIFY_PARAM_new, (void))                     \
	X(int, EVP_PKEY_up_ref, (EVP_PKEY *))                                      \
	X(int, RAND_bytes, (unsigned char *, int))                                 \
	X(void, CRYPTO_free, (void *, const char *, int))                          \
	X(int, i2d_PUBKEY, (const EVP_PKEY *, unsigned char **))                   \
	X(EVP_PKEY *, d2i_PUBKEY, (EVP_PKEY **, const unsigned char **, long))     \
	X(int, i2d_PrivateKey, (const EVP_PKEY *, unsigned char **))               \
	X(EVP_PKEY *, d2i_AutoPrivateKey, (EVP_PKEY **, const unsigned char **, long)) \
	X(void, EVP_PKEY_free, (EVP_PKEY *))                                       \
	X(EVP_PKEY *, EVP_PKEY_Q_keygen, (OSSL_LIB_CTX *, const char *, const char *, ...)) \
	X(const char *, OBJ_nid2sn, (int))                                         \
	X(void, X509_VERIFY_PARAM_free, (X509_VERIFY_PARAM *))                     \
	X(int, X509_verify_cert, (X509_STORE_CTX *))                               \
	X(int, X509_cmp, (const X509 *, const X509 *))                             \
	X(int, X509_up_ref, (X509 *))                                              \
	X(void, X509_free, (X509 *))                                               \
	X(X509_NAME *, X509_NAME_dup, (const X509_NAME *))                         \
	X(void, X509_NAME_free, (X509_NAME *))                                     \
	X(int, i2d_X509_NAME, (const X509_NAME *, unsigned char **))               \
	X(X509_NAME *, d2i_X509_NAME, (X509_NAME **, const unsigned char **, long)) \
	X(STACK_OF(X509) *, X509_chain_up_ref, (STACK_OF(X509) *))                 \
	X(void, OPENSSL_sk_pop_free, (OPENSSL_STACK *, void (*)(void *)))           \
	X(int, OPENSSL_sk_num, (const OPENSSL_STACK *))                            \
	X(void *, OPENSSL_sk_value, (const OPENSSL_STACK *, int))                  \
	X(int, ERR_set_mark, (void))                                               \
	X(int, ERR_pop_to_mark, (void))                                            \
	X(void, ERR_clear_error, (void))                                           \
	X(unsigned long, ERR_peek_error, (void))                                  \
	X(int, i2d_X509, (const X509 *, unsigned char **))                         \
	X(X509 *, d2i_X509, (X509 **, const unsigned char **, long))               \
	X(X509 *, X509_dup, (const X509 *))                                        \
	X(int, CRYPTO_get_ex_new_index, (int, long, void *, CRYPTO_EX_new *, CRYPTO_EX_dup *, CRYPTO_EX_free *)) \
	X(void, OPENSSL_cleanse, (void *, size_t))                                 \
	X(int, EVP_Digest, (const void *, size_t, unsigned char *, unsigned int *, const EVP_MD *, ENGINE *)) \
	X(const EVP_MD *, EVP_sha256, (void))                                      \
	X(OPENSSL_STACK *, OPENSSL_sk_new_null, (void))                            \
	X(int, OPENSSL_sk_push, (OPENSSL_STACK *, const void *))                   \
	X(kp_any_fn, BIO_get_callback, (const BIO *))                              \
	X(kp_any_fn, BIO_get_callback_ex, (const BIO *))                           \
	X(BIO *, BIO_next, (BIO *))                                                \
	X(kp_any_fn, X509_STORE_get_verify_cb, (const X509_STORE *))               \
	X(kp_any_fn, X509_STORE_get_verify, (const X509_STORE *))                  \
	X(kp_any_fn, X509_STORE_get_get_issuer, (const X509_STORE *))              \
	X(kp_any_fn, X509_STORE_get_check_issued, (const X509_STORE *))            \
	X(kp_any_fn, X509_STORE_get_check_revocation, (const X509_STORE *))        \
	X(kp_any_fn, X509_STORE_get_get_crl, (const X509_STORE *))                 \
	X(kp_any_fn, X509_STORE_get_check_crl, (const X509_STORE *))               \
	X(kp_any_fn, X509_STORE_get_cert_crl, (const X509_STORE *))                \
	X(kp_any_fn, X509_STORE_get_check_policy, (const X509_STORE *))            \
	X(kp_any_fn, X509_STORE_get_lookup_certs, (const X509_STORE *))            \
	X(kp_any_fn, X509_STORE_get_lookup_crls, (const X509_STORE *))             \
	X(kp_any_fn, X509_STORE_get_cleanup, (const X509_STORE *))

#define KP_TLS_FIELD(ret, name, args) ret(*name) args;
struct kp_ssl_table {
	KP_SSL_FUNCS(KP_TLS_FIELD)
	KP_CRYPTO_FUNCS(KP_TLS_FIELD)
};
#undef KP_TLS_FIELD

extern struct kp_ssl_table kp_ssl;

/* Bind the table (idempotent, thread-safe).  True when every function was
 * found; false leaves the TLS layer off for good (the wrappers then only
 * pass calls through, to whatever was found). */
bool kp_ssl_bind(void);

/* True when addr is in libssl's code: a wrapper called from there is
 * libssl calling its own export, and passes straight through. */
extern uintptr_t kp_libssl_lo, kp_libssl_hi;
static inline bool kp_from_libssl(const void *addr)
{
	return (uintptr_t)addr - kp_libssl_lo < kp_libssl_hi - kp_libssl_lo;
}

/* The executable segment of the object whose code holds fn (dladdr, then
 * the loader's list): true and [*lo, *hi) where fn is in it. */
bool kp_text_of(const void *fn, uintptr_t *lo, uintptr_t *hi);

#endif

/*
 * test_dl_names.c - dl_real.h: the names whose import declines a process
 * (docs/tls.md "BIO_f_ssl", "The first owner's handshake values", "What a
 * session shows"): what shows a session, and what sees past a hand-out,
 * matched whole, nothing else.
 */
#include <stdio.h>

#include "dl_real.h"

#include "check.h"

int main(void)
{
	static const char *const session[] = { "SSL_SESSION_get_master_key", "SSL_SESSION_get0_ticket",
					       "SSL_SESSION_print_keylog",   "SSL_SESSION_print",
					       "SSL_SESSION_print_fp",	     "PEM_write_SSL_SESSION",
					       "PEM_write_bio_SSL_SESSION",  "i2d_SSL_SESSION" };
	for (size_t i = 0; i < sizeof(session) / sizeof(*session); i++) {
		CHECK(kp_dl_shows_session(session[i]));
		CHECK(kp_dl_sees_past(session[i]));
	}
	static const char *const past[] = { "BIO_f_ssl", "BIO_new_ssl", "BIO_new_ssl_connect",
					    "BIO_new_buffer_ssl_connect", "BIO_number_read", "BIO_number_written",
					    "BIO_set_callback", "BIO_set_callback_ex", "SSL_get_client_random",
					    "SSL_get_server_random", "SSL_export_keying_material",
					    "SSL_export_keying_material_early" };
	for (size_t i = 0; i < sizeof(past) / sizeof(*past); i++) {
		CHECK(kp_dl_sees_past(past[i]));
		CHECK(!kp_dl_shows_session(past[i]));
	}
	/* what CPython, curl and the usual clients import stays allowed */
	static const char *const none[] = { "",
					    "i",
					    "i2d",
					    "i2d_",
					    "i2d_SSL_SESSIONx",
					    "i2d_SSL_SESSIO",
					    "d2i_SSL_SESSION",
					    "i2d_X509",
					    "SSL_get_finished",
					    "SSL_get_peer_finished",
					    "SSL_SESSION_free",
					    "SSL_SESSION_get_id",
					    "SSL_SESSION_get_time",
					    "SSL_get_session",
					    "SSL_get1_session",
					    "PEM_read_bio_SSL_SESSION",
					    "PEM_write_bio_X509",
					    "SSL_SESSION_print_keylogx",
					    "BIO_new",
					    "SSL_get_peer_cert_chain",
					    "SSL_get0_peer_CA_list",
					    "SSL_get_sigalgs" };
	for (size_t i = 0; i < sizeof(none) / sizeof(*none); i++) {
		CHECK(!kp_dl_sees_past(none[i]));
		CHECK(!kp_dl_shows_session(none[i]));
	}
	CHECK(!kp_dl_sees_past(NULL) && !kp_dl_shows_session(NULL));
	printf("test_dl_names: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}

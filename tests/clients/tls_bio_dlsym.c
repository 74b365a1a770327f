/*
 * tls_bio_dlsym - tests/clients/tls_bio.c with BIO_f_ssl found by dlsym:
 * a program that imports none of the BIO_f_ssl family (docs/tls.md
 * "BIO_f_ssl").
 */
#define TLS_BIO_BY_NAME 1
#include "tls_bio.c"

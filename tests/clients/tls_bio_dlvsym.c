/*
 * tls_bio_dlvsym - tests/clients/tls_bio.c with BIO_f_ssl found by dlvsym
 * (its versioned name): a program that imports none of the BIO_f_ssl
 * family (docs/tls.md "BIO_f_ssl").
 */
#define TLS_BIO_BY_NAME 2
#include "tls_bio.c"

/* crypto_direct.c - the record layer's libcrypto table (shim/tls_crypto.h)
 * filled from the libcrypto this test or fuzzer links, before main: in
 * the library, tls_real.c fills it from the program's copy. */
#define KP_TLS_CRYPTO_NAMES
#include "tls_crypto.h"

__attribute__((constructor)) static void crypto_direct(void)
{
#define KP_FILL(name) tlsrec_crypto.name = name;
	KP_RECORD_CRYPTO_FUNCS(KP_FILL)
#undef KP_FILL
}

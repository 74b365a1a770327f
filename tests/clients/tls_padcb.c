/* tls_padcb.c - tls_padcb PORT CA ROUNDS: per round a request; a record padding
 * callback set on the SSL right after SSL_connect; prints how often it
 * was called during the request and its SSL_shutdown, with which SSL
 * and argument.  With ONLY1 in the environment, round 1 only sets it
 * (tests/https_review.bats; from the HTTPS review at 6eba2ea, F1). */

#include <unistd.h>
#include "tls_common.h"
static int calls;
static SSL *cur;
static int round_no;
static size_t pad_cb(SSL *s, int type, size_t len, void *arg)
{
	(void)type; (void)len;
	calls++;
	printf("    pad_cb in round %d: its SSL is this round's=%d, arg from round %d\n", round_no, s == cur, *(int *)arg);
	return 0;
}
int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int port = atoi(argv[1]), rounds = atoi(argv[3]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	for (int r = 1; r <= rounds; r++) {
		SSL *s = tls_new(ctx, port);
		cur = s; round_no = r;
		int *arg = malloc(sizeof *arg); *arg = r;
		int c = SSL_connect(s);
		if (!getenv("ONLY1") || r == 1) { SSL_set_record_padding_callback(s, pad_cb); SSL_set_record_padding_callback_arg(s, arg); }
		int before = calls;
		char resp[8192];
		size_t got = 0;
		tls_get_f(s, resp, sizeof resp, &got);
		int mid = calls;
		int sh = SSL_shutdown(s);
		printf("%d connect=%d got=%zu padcb_request=%d padcb_shutdown=%d shutdown=%d\n", r, c, got, mid - before, calls - mid, sh);
		int fd = SSL_get_fd(s);
		SSL_free(s);
		close(fd);
		/* (arg kept: a real program would free it with its SSL) */
	}
	return 0;
}

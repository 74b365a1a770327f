/* tls_answer.c - the program's SSL answered from the state of a connection
 * taken from another process (the foreign engine's getters:
 * docs/tls-across.md "The hand-out in another process"). */
#include "tls_internal.h"

bool kp_tls_foreign_ever;

/* The answer of the foreign engine e (its import f) to q for ssl.  Caller
 * holds tls_lock. */
static void foreign_answer(struct kp_tls *e, struct tlsf *f, const SSL *ssl, enum kp_fq q,
			   const struct kp_fq_args *a, union kp_fq_ret *r)
{
	switch (q) {
	case KP_FQ_VERSION:
		r->i = tlsf_version(f);
		break;
	case KP_FQ_VERSION_STR:
		r->s = tlsf_version_string(f);
		break;
	case KP_FQ_CLIENT_VERSION: {
		/* the highest version its own ClientHello offered: the gate
		 * compared its limits with the connection's */
		long max = kp_ssl.SSL_ctrl((SSL *)ssl, SSL_CTRL_GET_MAX_PROTO_VERSION, 0, NULL);
		r->i = max && max < TLS1_3_VERSION ? max : TLS1_3_VERSION;
		break;
	}
	case KP_FQ_INIT_FINISHED:
		/* (0 between SSL_key_update and its KeyUpdate sent, or after
		 * a fatal error, as libssl) */
		r->i = !tlsf_in_init(f);
		break;
	case KP_FQ_IN_INIT:
		r->i = tlsf_in_init(f);
		break;
	case KP_FQ_IN_BEFORE:
		r->i = 0;
		break;
	case KP_FQ_KEY_UPDATE:
		/* the engine's own, under OpenSSL's rules: ours goes out at
		 * the next read, write or SSL_do_handshake (docs/tls-across.md
		 * "The hand-out in the library") */
		r->i = tlsf_key_update(f, a->type);
		break;
	case KP_FQ_KEY_UPDATE_TYPE:
		r->i = tlsf_key_update_type(f);
		break;
	case KP_FQ_STATE:
		r->i = TLS_ST_OK;
		break;
	case KP_FQ_STATE_STR:
		r->s = "SSLOK ";
		break;
	case KP_FQ_STATE_STR_LONG:
		r->s = "SSL negotiation finished successfully";
		break;
	case KP_FQ_SERVERNAME:
		r->s = a->type == TLSEXT_NAMETYPE_host_name ? e->sni : NULL;
		break;
	case KP_FQ_SERVERNAME_TYPE:
		r->i = e->sni ? TLSEXT_NAMETYPE_host_name : -1;
		break;
	case KP_FQ_FINISHED:
		r->z = tlsf_finished(f, a->buf, a->n);
		break;
	case KP_FQ_PEER_FINISHED:
		r->z = tlsf_peer_finished(f, a->buf, a->n);
		break;
	case KP_FQ_CLIENT_RANDOM:
		r->z = tlsf_client_random(f, a->buf, a->n);
		break;
	case KP_FQ_SERVER_RANDOM:
		r->z = tlsf_server_random(f, a->buf, a->n);
		break;
	case KP_FQ_ALPN: {
		const uint8_t *d;
		unsigned l;
		tlsf_alpn(f, &d, &l);
		*a->data = l ? d : NULL;
		*a->len = l;
		break;
	}
	case KP_FQ_EKM:
		r->i = tlsf_export_keying_material(f, a->buf, a->n, a->label, a->llen, a->ctx, a->clen, a->use_ctx);
		break;
	case KP_FQ_WANT:
		r->i = tlsf_want(f);
		break;
	case KP_FQ_PENDING_CIPHER:
		/* libssl keeps the handshake's suite there after it */
		r->p = kp_ssl.SSL_get_current_cipher(e->ssl);
		break;
	case KP_FQ_EXTMS:
		/* (libssl's after a handshake: its session's flag, never set
		 * in TLS 1.3) */
		r->i = (f->st.flags & TLSX_EXTMS) != 0;
		break;
	case KP_FQ_RI:
		/* (TLS 1.2: whether the server sent renegotiation_info; TLS
		 * 1.3's ServerHello carries none: 0) */
		r->i = (f->st.flags & TLSX_RI) != 0;
		break;
	case KP_FQ_GROUP:
		r->i = tlsx_group_nid(f->st.group);
		break;
	case KP_FQ_REFUSE_RENEGOTIATE:
		/* libssl's can_renegotiate (TLS 1.2 is handed only with the
		 * option; cleared since: a renegotiation, not ours to make) */
		r->i = f->version == TLSREC_V13			     ? SSL_R_WRONG_SSL_VERSION
		       : (f->options & SSL_OP_NO_RENEGOTIATION) ? SSL_R_NO_RENEGOTIATION
								 : 0;
		break;
	case KP_FQ_REFUSE_PHA:
		/* a server's call: refused to a client's SSL */
		r->i = f->version == TLSREC_V13 ? SSL_R_NOT_SERVER : SSL_R_WRONG_SSL_VERSION;
		break;
	}
}

bool kp_tls_foreign(const SSL *ssl, enum kp_fq q, const struct kp_fq_args *a, union kp_fq_ret *r)
{
	if (!__atomic_load_n(&kp_tls_foreign_ever, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool ours = h && h->e->im;
	if (ours)
		foreign_answer(h->e, &h->e->im->f, ssl, q, a, r);
	kp_unlock(&tls_lock);
	if (ours && q == KP_FQ_EKM && r->i != 1) {
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, SSL_R_TLS_ILLEGAL_EXPORTER_LABEL, NULL);
	}
	if (ours && q == KP_FQ_KEY_UPDATE && r->i != 1) {
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, tlsf_last_reason(&h->e->im->f), NULL);
	}
	if (ours && (q == KP_FQ_REFUSE_RENEGOTIATE || q == KP_FQ_REFUSE_PHA)) {
		if (!r->i)
			return false;
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, r->i, NULL);
	}
	return ours;
}

int kp_tls_foreign_handshake(struct tlsf *f)
{
	int r = tlsf_do_handshake(f), reason = tlsf_last_reason(f), saved = errno;
	if (r < 0 && reason >= 0 && tlsf_get_error(f, r) == SSL_ERROR_SSL) {
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, reason, NULL);
	}
	errno = saved;
	return r;
}

/* SSL_get0_peername of an SSL handed a pooled connection (tls.h) */
bool kp_tls_peername(SSL *ssl, const char **name)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool own = h && h->verified;
	if (own)
		*name = h->peername;
	kp_unlock(&tls_lock);
	return own;
}

bool kp_tls_verify_result(const SSL *ssl, long *result, STACK_OF(X509) **chain)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	/* (a real call, outside our lock) */
	bool resumed = kp_ssl.SSL_session_reused(ssl);
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool own = h && h->verified;
	if (own) {
		*result = h->verify_result;
		*chain = h->vchain;
	} else if (resumed) {
		/* our session resumed: no chain verified in the handshake, the
		 * one we verified for it before offering it */
		struct record *r = record_get(ssl, false);
		if ((own = r && r->offered)) {
			*result = r->offered_result;
			*chain = r->offered_chain;
		}
	}
	struct record *r = own ? NULL : record_get(ssl, false);
	if (r && r->cleared_chain && !kp_ssl.SSL_get0_verified_chain(ssl)) {
		/* reset after a hand-out, no full handshake since (kp_tls_reset) */
		own = true;
		*result = kp_ssl.SSL_get_verify_result(ssl);
		*chain = r->cleared_chain;
	}
	kp_unlock(&tls_lock);
	return own;
}

void kp_tls_set_verify_result(SSL *ssl, long result)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	struct record *r = h && h->verified ? NULL : record_get(ssl, false);
	if (h && h->verified) {
		h->verify_result = result;
		h->verify_set = true;
	} else if (r && r->offered) {
		r->offered_result = result;
	}
	kp_unlock(&tls_lock);
}

# tls.sh - a test CA and its certificates, made with the openssl command
# line (Debian's openssl).  Bash; sourced (scripts/lib/nginx.sh).
#
#   tls_make DIR   DIR/ca.pem (the test CA), server.pem/.key (DNS:localhost,
#                  IP:127.0.0.1, IP:::1), client-a.pem/.key and client-b
#                  (client certificates from the CA), other-ca.pem (a CA
#                  that signed nothing here: trusting only it must fail),
#                  client-rsa.pem/.key (an RSA client certificate),
#                  int.pem (an intermediate CA), client-int.pem/.key (a
#                  client certificate under it) and client-chain.pem (that
#                  certificate followed by int.pem)

_tls_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
_tls_rsa_key() { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null; }

# _tls_cert DIR NAME SUBJECT EXTENSIONS [CA] [KEYGEN]: NAME.pem signed by DIR/CA (ca)
_tls_cert() {
	local dir=$1 name=$2 subj=$3 ext=$4 ca=${5:-ca}
	${6:-_tls_key} "$dir/$name.key" &&
		openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr" 2>/dev/null &&
		printf '%s\n' "$ext" >"$dir/$name.ext" &&
		openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.pem" -CAkey "$dir/$ca.key" \
			-CAcreateserial -days 3650 -extfile "$dir/$name.ext" \
			-out "$dir/$name.pem" 2>/dev/null
}

#
# With TLS_MAKE_CACHE=DIR (the tests set it: one set per bats run), tls_make
# makes the set once in DIR (under a lock: tests run in parallel) and copies
# it: a set costs about 0.7 s of CPU (the RSA key most), the tests make ~100.
tls_make() {
	local dir=$1 cache=${TLS_MAKE_CACHE:-}
	[ -n "$cache" ] || { _tls_make "$dir"; return; }
	mkdir -p "$cache" "$dir" || return 1
	# (made last, once the set is whole: seen, the lock is not needed)
	[ -e "$cache/made" ] || (
		flock 9 || exit 1
		[ -e "$cache/made" ] || { _tls_make "$cache" && : >"$cache/made"; }
	) 9>"$cache.lock" || return 1
	cp -p "$cache"/*.pem "$cache"/*.key "$dir/" && chmod -R a+rX "$dir"
}

_tls_make() {
	local dir=$1
	mkdir -p "$dir" || return 1
	_tls_key "$dir/ca.key" &&
		openssl req -x509 -new -key "$dir/ca.key" -subj "/CN=libkeepalive test CA" \
			-days 3650 -out "$dir/ca.pem" 2>/dev/null &&
		_tls_key "$dir/other-ca.key" &&
		openssl req -x509 -new -key "$dir/other-ca.key" -subj "/CN=some other CA" \
			-days 3650 -out "$dir/other-ca.pem" 2>/dev/null &&
		_tls_cert "$dir" server "/CN=localhost" \
			"subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
basicConstraints=CA:FALSE
extendedKeyUsage=serverAuth" &&
		_tls_cert "$dir" client-a "/CN=client-a" "extendedKeyUsage=clientAuth" &&
		_tls_cert "$dir" client-b "/CN=client-b" "extendedKeyUsage=clientAuth" &&
		_tls_cert "$dir" client-rsa "/CN=client-rsa" "extendedKeyUsage=clientAuth" ca _tls_rsa_key &&
		_tls_cert "$dir" int "/CN=libkeepalive test intermediate" "basicConstraints=critical,CA:TRUE
keyUsage=keyCertSign,cRLSign" &&
		_tls_cert "$dir" client-int "/CN=client-under-int" "extendedKeyUsage=clientAuth" int &&
		cat "$dir/client-int.pem" "$dir/int.pem" >"$dir/client-chain.pem" &&
		chmod -R a+rX "$dir"
}

#!/usr/bin/env bats
# The Debian package and the installed layout (README, "Install").
#
# setup_file builds the package from a `git clone` of this repository, so
# it tests the committed tree (commit before running this file), and
# unpacks it into a throwaway root with `dpkg -x`.  The tests then run
# `keepalive curl` against nginx from that root's paths only, check the
# man pages and lintian, and that one version number reaches everything.
# Its own temporary directories and free ports: safe beside other files.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	suite_setup
	export PKG_DIR="$BATS_FILE_TMPDIR/pkg"
	mkdir -p "$PKG_DIR"
	git clone -q "$ROOT" "$PKG_DIR/src"
	(cd "$PKG_DIR/src" && dpkg-buildpackage -us -uc -b) >"$PKG_DIR/build.log" 2>&1 || {
		tail -n 30 "$PKG_DIR/build.log" >&2
		return 1
	}
	export VERSION ARCH DEB INST TRIPLET
	VERSION=$(dpkg-parsechangelog -l "$PKG_DIR/src/debian/changelog" -S Version)
	ARCH=$(dpkg-architecture -q DEB_HOST_ARCH)
	TRIPLET=$(dpkg-architecture -q DEB_HOST_MULTIARCH)
	DEB="$PKG_DIR/keepalive_${VERSION}_${ARCH}.deb"
	INST="$PKG_DIR/root"
	dpkg -x "$DEB" "$INST"
}

setup() {
	nginx_start
	# a private per-user directory: no other test's (or user's) broker
	export XDG_RUNTIME_DIR="$BATS_TEST_TMPDIR/run"
	mkdir -m 0700 "$XDG_RUNTIME_DIR"
}
teardown() { servers_stop; }

# the installed keepalive, run from the throwaway root: nothing from the
# build tree (KEEPALIVE_PRELOAD is the ASan run's build-tree preload)
inst_keepalive() { env -u KEEPALIVE_PRELOAD -u LD_PRELOAD "$INST/usr/bin/keepalive" "$@"; }

@test "the package keepalive holds the libraries and helpers in the private /usr/lib/keepalive, keepalive, the units, the man pages, the README, the MIT licence" {
	run dpkg-deb -c "$DEB"
	assert_success
	local f
	for f in usr/bin/keepalive \
		usr/lib/keepalive/libkeepalive.so usr/lib/keepalive/libkeepalive-audit.so \
		usr/lib/keepalive/keepalive-broker usr/lib/keepalive/keepalive-run usr/lib/keepalive/compare \
		usr/lib/keepalive/keepalive usr/lib/keepalive/keepalive.sh \
		usr/lib/systemd/user/keepalive-broker.socket usr/lib/systemd/user/keepalive-broker.service \
		usr/share/man/man1/keepalive.1.gz usr/share/man/man7/libkeepalive.7.gz \
		usr/share/doc/keepalive/README.md usr/share/doc/keepalive/docs/wrapper.md usr/share/doc/keepalive/copyright; do
		assert_output --partial "./$f"
	done
	# the README's links to docs/*.md lead to files of those names
	local doc="$INST/usr/share/doc/keepalive" link
	for link in $(grep -oE '\(docs/[a-z0-9_-]+\.md' "$doc/README.md" | tr -d '(' | sort -u); do
		[ -f "$doc/$link" ] || fail "README links $link: not installed under that name"
	done
	# nothing in the public library directories (no soname: not a shared library)
	refute_output --partial "./usr/lib/$TRIPLET/"
	# the unit starts the broker where the package put it
	assert_equal "$(grep '^ExecStart=' "$INST/usr/lib/systemd/user/keepalive-broker.service")" \
		"ExecStart=/usr/lib/keepalive/keepalive-broker"
	grep -q '^Documentation=man:keepalive(1)' "$INST/usr/lib/systemd/user/keepalive-broker.service"
	grep -q '^NoNewPrivileges=yes' "$INST/usr/lib/systemd/user/keepalive-broker.service"
	run dpkg-deb -f "$DEB" Package Depends
	assert_line "Package: keepalive"
	assert_output --partial 'libc6'
	# MIT: the root's LICENSE, a DEP-5 copyright saying Expat
	grep -q '^MIT License' "$ROOT/LICENSE"
	run grep -E '^(Format|License):' "$INST/usr/share/doc/keepalive/copyright"
	assert_line --index 0 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/'
	assert_line 'License: Expat'
	refute_output --partial 'not-yet-licensed'
}

@test "the package enables no user unit: the socket is opt-in (systemctl --user enable)" {
	local ctl="$BATS_TEST_TMPDIR/ctl"
	dpkg-deb -e "$DEB" "$ctl"
	# debhelper's --no-enable postinst only keeps a user's own choice
	# (was-enabled); without it the unit is enabled for every user
	run grep -c -- '--user enable' "$ctl/postinst"
	local enables=$output
	run sh -c "grep -B 3 -- '--user enable' '$ctl/postinst' | grep -c 'was-enabled'"
	assert_output "$enables"
	run grep -- '--user enable' "$ctl/postinst"
	refute_output --partial "Enables the unit on first installation"
	! grep -q 'on first installation' "$ctl/postinst"
	run grep -c 'systemctl --user enable --now keepalive-broker.socket' "$ROOT/man/keepalive.1"
	refute_output 0
}

@test "lintian: no errors" {
	run lintian "$PKG_DIR"/keepalive_"${VERSION}"_"${ARCH}".changes
	echo "$output"
	refute_line --regexp '^E: '
}

@test "installed keepalive --version: the changelog's version, the library and broker from the package's directories" {
	run inst_keepalive --version
	assert_success
	assert_line --index 0 "keepalive $VERSION"
	assert_line --index 1 "library: $INST/usr/lib/keepalive/libkeepalive.so"
	assert_line --index 2 "broker: $INST/usr/lib/keepalive/keepalive-broker"
}

@test "installed keepalive: a shell loop of 5 curls, the same output, 5 server connections without and 1 with" {
	local url="http://127.0.0.1:$NGINX_PORT/f" loop t="$BATS_TEST_TMPDIR"
	loop="for i in 1 2 3 4 5; do $CURL -s -i $url || exit 1; done"
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$loop" >"$t/plain.out"
	server_wait_requests 5
	assert_equal "plain conns $(nginx_conns) requests $(nginx_requests)" "plain conns 5 requests 5"
	nginx_reset
	KEEPALIVE_PORTS=$NGINX_PORT KEEPALIVE_STATS=1 timeout "$((CLIENT_TIMEOUT * SLOW))" \
		env -u KEEPALIVE_PRELOAD -u LD_PRELOAD "$INST/usr/bin/keepalive" sh -c "$loop" \
		>"$t/shim.out" 2>"$t/shim.err"
	# the summed line comes just after the command ended (docs/wrapper.md)
	wait_until grep -q '^libkeepalive: processes=' "$t/shim.err" || true
	cat "$t/shim.err"
	server_wait_requests 5
	assert_equal "shim conns $(nginx_conns) requests $(nginx_requests)" "shim conns 1 requests 5"
	assert_equal "$(grep -c '^HTTP/1.1 200 OK' "$t/shim.out")" 5
	assert_same_output --headers
	# the summed stats line names the version; the broker handed out 4
	run grep '^libkeepalive: ' "$t/shim.err"
	assert_output --regexp "^libkeepalive: processes=[0-9]+ connects=5 .* broker_got=4 .* version=$VERSION\$"
}

@test "man keepalive and man libkeepalive find the installed pages; they render without warnings" {
	local page
	for page in 1/keepalive 7/libkeepalive; do
		run env MANPATH="$INST/usr/share/man" man -w "${page#*/}"
		assert_success
		assert_output "$INST/usr/share/man/man${page%/*}/${page#*/}.${page%/*}.gz"
		# man-db runs groff with -ww (all warnings) under --warnings
		run --separate-stderr env LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$output"
		assert_success
		assert_equal "warnings: $stderr" "warnings: "
		assert_output --partial "${page#*/}"
	done
	run env LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$INST/usr/share/man/man1/keepalive.1.gz"
	assert_output --partial 'EXIT STATUS'
	assert_output --partial 'EXAMPLES'
}

@test "libkeepalive(7) describes every KEEPALIVE_* variable the code reads or sets" {
	local names name missing=
	# the header guards (KEEPALIVE_*_H) are not settings
	names=$(grep -rhoE 'KEEPALIVE_[A-Z0-9_]+' "$ROOT/shim" "$ROOT/pool" "$ROOT/audit" "$ROOT/scripts" |
		grep -v '_H$' | sort -u)
	[ -n "$names" ]
	for name in $names; do
		grep -q "^\.It Ev $name\b" "$ROOT/man/libkeepalive.7" || missing="$missing $name"
	done
	assert_equal "missing:$missing" "missing:"
}

@test "one version: the build tree's library, broker and keepalive report debian/changelog's" {
	local v
	v=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
	run env -u KEEPALIVE_PRELOAD "$ROOT/scripts/keepalive" --version
	assert_success
	assert_line --index 0 "keepalive $v"
	assert_line --index 1 "library: $ROOT/build/libkeepalive.so"
	run "$ROOT/build/keepalive-broker" --version
	assert_output "keepalive-broker $v"
	# the stats line and the debug log's "loaded" line carry it too
	run env KEEPALIVE_STATS=1 KEEPALIVE_LOG=debug LD_PRELOAD="$PRELOAD" /bin/true
	assert_line --regexp "^libkeepalive: connects=0 .* version=$v\$"
	assert_line --regexp " kp_init: loaded version=$v\$"
}

@test "make install into a prefix: keepalive there finds its own library and broker, and pools; make uninstall removes it all" {
	local dest="$BATS_TEST_TMPDIR/dest"
	make -s -C "$PKG_DIR/src" install DESTDIR="$dest" PREFIX=/opt/ka >/dev/null
	run env -u KEEPALIVE_PRELOAD "$dest/opt/ka/bin/keepalive" --version
	assert_success
	assert_line --index 1 "library: $dest/opt/ka/lib/keepalive/libkeepalive.so"
	assert_line --index 2 "broker: $dest/opt/ka/lib/keepalive/keepalive-broker"
	[ -f "$dest/opt/ka/share/man/man7/libkeepalive.7" ]
	local url="http://127.0.0.1:$NGINX_PORT/f"
	run env -u KEEPALIVE_PRELOAD KEEPALIVE_PORTS="$NGINX_PORT" "$dest/opt/ka/bin/keepalive" \
		sh -c "$CURL -s $url >/dev/null && $CURL -s $url >/dev/null && $CURL -s $url"
	assert_success
	server_wait_requests 3
	assert_output "$(cat "$NGINX_DIR/www/f")"
	assert_equal "conns $(nginx_conns) requests $(nginx_requests)" "conns 1 requests 3"
	# the entry point is a link to the one beside the helpers
	assert_equal "$(readlink "$dest/opt/ka/bin/keepalive")" "../lib/keepalive/keepalive"
	run make -C "$PKG_DIR/src" uninstall DESTDIR="$dest" PREFIX=/opt/ka
	assert_success
	refute_output --partial "ignored"
	# nothing it wrote, and no directory it made that is empty now
	run find "$dest" -mindepth 1 \( ! -type d -o -name bin -o -name keepalive -o -name 'man[17]' -o -name systemd \)
	assert_output ""
}

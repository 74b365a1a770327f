# libkeepalive - see README.md
CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
ALLFLAGS := -std=gnu11 -fPIC -fvisibility=hidden -D_GNU_SOURCE -pthread $(WARN) -Ishim -Ipool $(CFLAGS)
LDLIBS  := -ldl -pthread
# the libssl wrappers carry libssl 3's symbol version (see the map)
LDMAP   := -Wl,--version-script=shim/exports.map
PREFIX  ?= /usr/local
NPROC   := $(shell nproc 2>/dev/null || echo 1)
# the one version number: the first line of debian/changelog (the package's
# version, and what the library, the broker and keepalive --version report)
VERSION := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
ALLFLAGS += -DKP_VERSION='"$(VERSION)"'
# no _FORTIFY_SOURCE in the preload library (whatever CFLAGS or the
# compiler's default say): it would turn the library's own libc calls into
# the __read_chk family that the library itself interposes
ALLFLAGS += -U_FORTIFY_SOURCE

# the library: the shim and the pool (not the broker's main)
# (ACROSS_SRCS, the record layer, the export message and the foreign engine
# of whole TLS connections across processes, reach libcrypto through a
# table, shim/tls_crypto.h: the library fills it from the program's copy,
# their unit tests and fuzzers from the libcrypto they link,
# CRYPTO_DIRECT)
ACROSS_SRCS := shim/tls_record.c shim/tls_export.c shim/tls_foreign.c
CRYPTO_DIRECT := tests/unit/crypto_direct.c
SRCS := $(wildcard shim/*.c) $(filter-out pool/broker.c,$(wildcard pool/*.c))
HDRS := $(wildcard shim/*.h) $(wildcard pool/*.h) shim/exports.map debian/changelog
LIB  := build/libkeepalive.so
# the per-user pool process (docs/design.md §8): its own small program, never
# preloaded, sharing pool.c's policy
BROKER := build/keepalive-broker
RUNNER := build/keepalive-run
WRAPPER := build/keepalive
BROKER_SRCS := pool/broker.c pool/broker_proto.c pool/broker_check.c pool/pool.c pool/kp_mem.c
ASAN_LIB := build/libkeepalive-asan.so
TSAN_LIB := build/libkeepalive-tsan.so
# the rtld-audit module (LD_AUDIT) that lets RTLD_DEEPBIND libraries see
# the shim: audit/audit.c, a library of its own
AUDIT_LIB := build/libkeepalive-audit.so
SAN  := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# the pure modules (no syscalls): unit-tested and fuzzed on their own
PURE_SRCS := $(wildcard shim/framer.c shim/replay.c shim/der.c shim/elf_sym.c pool/pool.c pool/kp_mem.c pool/broker_proto.c)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,build/unit/%,$(UNIT_SRCS))
CLIENT_SRCS := $(wildcard tests/clients/*.c)
CLIENT_BINS := $(patsubst tests/clients/%.c,build/clients/%,$(CLIENT_SRCS))

.PHONY: all asan tsan test test-asan check unit bats clients clean install uninstall fuzz fuzz-build bench bench-fastpath bench-cost owner-matrix tls-pairs
all: $(LIB) $(AUDIT_LIB) $(BROKER) $(RUNNER) $(WRAPPER)

# the keepalive wrapper's C steps (docs/wrapper.md): the entry point that
# keeps the caller's environment (scripts/keepalive links to it), and the
# last exec and the watcher of what outlives the wrapper
$(RUNNER): scripts/keepalive-run.c Makefile
	@mkdir -p build
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -o $@ $<

$(WRAPPER): scripts/keepalive-main.c Makefile
	@mkdir -p build
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -o $@ $<

$(BROKER): $(BROKER_SRCS) $(wildcard pool/*.h) Makefile debian/changelog
	@mkdir -p build
	$(CC) -std=gnu11 -D_GNU_SOURCE -pthread $(WARN) -Ipool -DKP_VERSION='"$(VERSION)"' $(CFLAGS) -o $@ $(BROKER_SRCS) -pthread

# linked from its objects, each compiled alone (build/obj/, also the
# structure checks' objects): a header change rebuilds the objects that
# include it (-MMD -MP: build/obj/*.d), and nothing else
$(LIB): $(patsubst %.c,build/obj/%.o,$(SRCS)) shim/exports.map Makefile
	@mkdir -p build
	$(CC) $(ALLFLAGS) -shared -Wl,-soname,libkeepalive.so $(LDMAP) -o $@ $(filter %.o,$^) $(LDLIBS)

# its objects (build/san/, one compiler per file under make -j) are the
# ones the unit tests and fuzz replayers link too: same flags
$(ASAN_LIB): $(patsubst %.c,build/san/%.o,$(SRCS)) shim/exports.map Makefile
	@mkdir -p build
	$(CC) $(ALLFLAGS) $(SAN) -shared $(LDMAP) -o $@ $(filter %.o,$^) $(LDLIBS)

asan: $(ASAN_LIB)

$(AUDIT_LIB): audit/audit.c Makefile
	@mkdir -p build
	$(CC) -std=gnu11 -fPIC -fvisibility=hidden -D_GNU_SOURCE $(WARN) $(CFLAGS) -shared -Wl,-soname,libkeepalive-audit.so -o $@ $<

# ThreadSanitizer build: the threads tests run under it when it is built
# (bats builds it: see tests/survive.bats)
$(TSAN_LIB): $(SRCS) $(HDRS) Makefile
	@mkdir -p build
	$(CC) $(ALLFLAGS) -c -o build/tsan-dl_real.o shim/dl_real.c
	$(CC) $(ALLFLAGS) -fsanitize=thread -fno-omit-frame-pointer -shared $(LDMAP) -o $@ \
		$(filter-out shim/dl_real.c,$(SRCS)) build/tsan-dl_real.o $(LDLIBS)

tsan: $(TSAN_LIB)

# a test build without the liveness probe before a non-idempotent request's
# first byte, so that tests can make such a request meet a dead connection
# (tests/methods.bats builds it)
build/libkeepalive-noprobe.so: $(SRCS) $(HDRS) Makefile
	@mkdir -p build
	$(CC) $(ALLFLAGS) -DKP_TEST_NO_PROBE -shared $(LDMAP) -o $@ $(SRCS) $(LDLIBS)

# a test build whose parked TLS connections, under KEEPALIVE_TLS_ACROSS,
# prove their export: the state imported into the foreign engine makes a
# request of its own on the socket (tests/https_across.bats)
build/libkeepalive-acrosscheck.so: $(SRCS) $(HDRS) Makefile
	@mkdir -p build
	$(CC) $(ALLFLAGS) -DKP_TEST_ACROSS_VERIFY='"/f?across-check"' -shared $(LDMAP) -o $@ $(SRCS) $(LDLIBS)

# unit tests link the pure modules directly and run under ASan+UBSan; the
# modules are compiled once (build/san/) for them, the fuzz replayers and
# the ASan library
PURE_SAN_OBJS := $(patsubst %.c,build/san/%.o,$(PURE_SRCS))

build/san/%.o: %.c Makefile debian/changelog
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $(SAN) -MMD -MP -c -o $@ $<

# our dlsym's path (shim/dl_real.c) runs before the sanitizers' runtimes
# are set up (they look their interceptors up with dlsym, ours): never
# instrumented
build/san/shim/dl_real.o: shim/dl_real.c Makefile debian/changelog
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -MMD -MP -c -o $@ $<

build/unit/%: tests/unit/%.c $(PURE_SAN_OBJS) $(HDRS) $(wildcard tests/unit/*.h) Makefile
	@mkdir -p build/unit
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< $(PURE_SAN_OBJS) $(LDLIBS)

# the broker's fd checks on real sockets (their calls are injected: the
# test passes libc's)
build/unit/test_broker_check: tests/unit/test_broker_check.c build/san/pool/broker_check.o $(PURE_SAN_OBJS) $(HDRS) $(wildcard tests/unit/*.h) Makefile
	@mkdir -p build/unit
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< build/san/pool/broker_check.o $(PURE_SAN_OBJS) $(LDLIBS)

# the names whose import declines a process (shim/dl_real.c, never
# instrumented: see above)
build/unit/test_dl_names: tests/unit/test_dl_names.c build/san/shim/dl_real.o $(PURE_SAN_OBJS) $(HDRS) $(wildcard tests/unit/*.h) Makefile
	@mkdir -p build/unit
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< build/san/shim/dl_real.o $(PURE_SAN_OBJS) $(LDLIBS)

# the socket options service on real sockets: below the connection core,
# so it links with the real-function table only
build/unit/test_sockopts: tests/unit/test_sockopts.c build/san/shim/sockopts.o build/san/shim/real.o build/san/shim/dl_real.o $(PURE_SAN_OBJS) $(HDRS) $(wildcard tests/unit/*.h) Makefile
	@mkdir -p build/unit
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< build/san/shim/sockopts.o build/san/shim/real.o build/san/shim/dl_real.o $(PURE_SAN_OBJS) $(LDLIBS)

# the record layer against OpenSSL itself, the export message (libssl and
# libcrypto: these tests only, neither is in the library)
ACROSS_SAN_OBJS := $(patsubst %.c,build/san/%.o,$(ACROSS_SRCS))

build/unit/test_tls_record build/unit/test_tls_export build/unit/test_tls_foreign: build/unit/%: tests/unit/%.c $(ACROSS_SAN_OBJS) $(CRYPTO_DIRECT) $(HDRS) shim/tls_record.h shim/tls_export.h shim/tls_foreign.h $(wildcard tests/unit/*.h) Makefile
	@mkdir -p build/unit
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< $(CRYPTO_DIRECT) $(ACROSS_SAN_OBJS) $(LDLIBS) -lssl -lcrypto

# the connection core in process (docs/structure.md): every library
# object but the wrappers (no libc name interposed in the test)
CORE_SAN_OBJS := $(patsubst %.c,build/san/%.o,$(filter-out shim/hooks_%,$(SRCS)))

build/unit/test_conn: tests/unit/test_conn.c $(CORE_SAN_OBJS) $(HDRS) $(wildcard tests/unit/*.h) Makefile
	@mkdir -p build/unit
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< $(CORE_SAN_OBJS) $(LDLIBS)

# the differential test against llhttp (Debian's node-llhttp): its C sources
# are compiled into this test only, never into the library
LLHTTP_DIR := /usr/share/llhttp
LLHTTP_INC := /usr/share/include/llhttp
LLHTTP_SRCS := $(LLHTTP_DIR)/api.c $(LLHTTP_DIR)/http.c $(LLHTTP_DIR)/llhttp.c
LLHTTP_OBJS := $(patsubst $(LLHTTP_DIR)/%.c,build/llhttp/%.o,$(LLHTTP_SRCS))

$(LLHTTP_SRCS) $(LLHTTP_INC)/llhttp.h:
	@echo "llhttp sources missing ($@): run scripts/deps (Debian package node-llhttp)" >&2; exit 1

# not our code: no -Werror.  Strict mode: the default build of llhttp 8.1
# takes any two bytes after chunk data for the CRLF, and so misframes.
LLHTTP_FLAGS := -std=gnu11 -D_GNU_SOURCE -DLLHTTP_STRICT_MODE=1 -I$(LLHTTP_INC)

build/llhttp/%.o: $(LLHTTP_DIR)/%.c $(LLHTTP_INC)/llhttp.h Makefile
	@mkdir -p build/llhttp
	$(CC) $(LLHTTP_FLAGS) $(CFLAGS) $(SAN) -c -o $@ $<

build/unit/test_llhttp: tests/unit/test_llhttp.c $(LLHTTP_OBJS) $(PURE_SAN_OBJS) $(HDRS) $(wildcard tests/unit/*.h) Makefile
	@mkdir -p build/unit
	$(CC) $(ALLFLAGS) -I$(LLHTTP_INC) $(SAN) -o $@ $< $(PURE_SAN_OBJS) $(LLHTTP_OBJS) $(LDLIBS)

build/clients/%: tests/clients/%.c $(wildcard tests/clients/*.h) Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -o $@ $<

# an old-style libaio (inline syscall instruction) and its client
build/clients/libinline_aio.so: tests/clients/lib/inline_aio.c Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $<
build/clients/inline_aio_get: tests/clients/inline_aio_get.c build/clients/libinline_aio.so Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $< -Lbuild/clients -linline_aio -Wl,-rpath,'$$ORIGIN'
# the same library as a plugin: dlopen()ed, its functions registered by its
# constructor with the program (which exports the registration)
build/clients/libinline_aio_plugin.so: tests/clients/lib/inline_aio_plugin.c tests/clients/lib/inline_aio.c Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $<
build/clients/inline_aio_plugin_get: tests/clients/inline_aio_plugin_get.c tests/clients/inline_aio_get.c build/clients/libinline_aio_plugin.so Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $< -ldl -Wl,--export-dynamic-symbol=inline_aio_register

# another interposer, preloaded with ours (tests/signals.bats: the bind check)
build/clients/libinterpose.so: tests/clients/lib/interpose.c Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl

# a liburing of the newer kind (inline syscall instruction) and its client
build/clients/liburing_inline.so: tests/clients/lib/inline_uring.c Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $<
build/clients/uring_lib_get: tests/clients/uring_lib_get.c tests/clients/uring_get.c build/clients/liburing_inline.so Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $< -Lbuild/clients -luring_inline -Wl,-rpath,'$$ORIGIN'

# clients that speak TLS themselves link libssl (libssl-dev)
build/clients/tls_bio_dlsym: tests/clients/tls_bio.c
build/clients/tls_bio_dlvsym: tests/clients/tls_bio.c
build/clients/tls_%: tests/clients/tls_%.c $(wildcard tests/clients/*.h) Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -o $@ $< -lssl -lcrypto

# a GnuTLS server (libgnutls28-dev): what OpenSSL cannot serve
build/clients/gnutls_%: tests/clients/gnutls_%.c Makefile
	@mkdir -p build/clients
	$(CC) -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $< -lgnutls

# the WAN emulator the benchmarks put between client and server (not in all)
build/latency-proxy: scripts/latency-proxy.c Makefile
	@mkdir -p build
	$(CC) -std=gnu11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) -o $@ $<

# calls one wrapped function in a loop, for bench-fastpath (not in all)
build/fastpath-loop: scripts/fastpath-loop.c Makefile
	@mkdir -p build
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -o $@ $<

# the before/after measurement (docs/measuring.md); BENCH_ARGS: its options
bench: $(LIB) build/clients/httpget build/latency-proxy
	scripts/bench $(BENCH_ARGS)

# libFuzzer harnesses of the framer (clang): make fuzz [FUZZ_SECONDS=60]
# runs each on a scratch corpus under build/fuzz/ seeded from tests/corpus/;
# crash inputs land in build/fuzz/crashes/<name>/.  make unit replays the
# seeds and the committed crash inputs through the same harnesses, built
# without libFuzzer by $(CC).
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_NAMES := response request rewrite llhttp broker split tls_record tls_export tls_foreign
FUZZ_BINS := $(patsubst %,build/fuzz/fuzz_%,$(FUZZ_NAMES))
REPLAY_BINS := $(patsubst %,build/fuzz-replay/fuzz_%,$(FUZZ_NAMES))
FUZZ_FLAGS := -std=gnu11 -D_GNU_SOURCE -g -O1 $(WARN) -Ishim \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h shim/framer.c shim/framer.h Makefile
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang (apt-get install clang)" >&2; exit 1; }
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< shim/framer.c

build/fuzz-replay/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h build/san/shim/framer.o Makefile
	@mkdir -p build/fuzz-replay
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< tests/fuzz/replay.c build/san/shim/framer.o

# the broker's message decoder (pool/broker_proto.c), not the framer
build/fuzz/fuzz_broker: tests/fuzz/fuzz_broker.c tests/fuzz/fuzz.h pool/broker_proto.c pool/broker_proto.h pool/pool.h Makefile
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang (apt-get install clang)" >&2; exit 1; }
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -Ipool -o $@ $< pool/broker_proto.c

build/fuzz-replay/fuzz_broker: tests/fuzz/fuzz_broker.c tests/fuzz/replay.c tests/fuzz/fuzz.h build/san/pool/broker_proto.o Makefile
	@mkdir -p build/fuzz-replay
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< tests/fuzz/replay.c build/san/pool/broker_proto.o

# the TLS record layer's reader (shim/tls_record.c, libcrypto), not the framer
build/fuzz/fuzz_tls_record: tests/fuzz/fuzz_tls_record.c tests/fuzz/fuzz.h shim/tls_record.c shim/tls_record.h Makefile
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang (apt-get install clang)" >&2; exit 1; }
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< shim/tls_record.c $(CRYPTO_DIRECT) -lcrypto

build/fuzz-replay/fuzz_tls_record: tests/fuzz/fuzz_tls_record.c tests/fuzz/replay.c tests/fuzz/fuzz.h build/san/shim/tls_record.o Makefile
	@mkdir -p build/fuzz-replay
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< tests/fuzz/replay.c build/san/shim/tls_record.o $(CRYPTO_DIRECT) -lcrypto

# the export message's decoder (shim/tls_export.c over tls_record.c)
build/fuzz/fuzz_tls_export: tests/fuzz/fuzz_tls_export.c tests/fuzz/fuzz.h $(ACROSS_SRCS) shim/tls_record.h shim/tls_export.h Makefile
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang (apt-get install clang)" >&2; exit 1; }
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(ACROSS_SRCS) $(CRYPTO_DIRECT) -lcrypto

build/fuzz-replay/fuzz_tls_export: tests/fuzz/fuzz_tls_export.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(ACROSS_SAN_OBJS) Makefile
	@mkdir -p build/fuzz-replay
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< tests/fuzz/replay.c $(ACROSS_SAN_OBJS) $(CRYPTO_DIRECT) -lcrypto

# the foreign engine (shim/tls_foreign.c over the record layer and the
# export message)
build/fuzz/fuzz_tls_foreign: tests/fuzz/fuzz_tls_foreign.c tests/fuzz/fuzz.h $(ACROSS_SRCS) shim/tls_record.h shim/tls_export.h shim/tls_foreign.h Makefile
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang (apt-get install clang)" >&2; exit 1; }
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(ACROSS_SRCS) $(CRYPTO_DIRECT) -lcrypto

build/fuzz-replay/fuzz_tls_foreign: tests/fuzz/fuzz_tls_foreign.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(ACROSS_SAN_OBJS) Makefile
	@mkdir -p build/fuzz-replay
	$(CC) $(ALLFLAGS) $(SAN) -o $@ $< tests/fuzz/replay.c $(ACROSS_SAN_OBJS) $(CRYPTO_DIRECT) -lcrypto

# our response framer against llhttp on arbitrary bytes (llhttp built for
# libFuzzer too, without our warnings)
FUZZ_LLHTTP_OBJS := $(patsubst $(LLHTTP_DIR)/%.c,build/fuzz/llhttp/%.o,$(LLHTTP_SRCS))

build/fuzz/llhttp/%.o: $(LLHTTP_DIR)/%.c $(LLHTTP_INC)/llhttp.h Makefile
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang (apt-get install clang)" >&2; exit 1; }
	@mkdir -p build/fuzz/llhttp
	$(FUZZ_CC) $(LLHTTP_FLAGS) -g -O1 -w \
		-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -c -o $@ $<

build/fuzz/fuzz_llhttp: tests/fuzz/fuzz_llhttp.c tests/fuzz/fuzz.h $(FUZZ_LLHTTP_OBJS) shim/framer.c shim/framer.h Makefile
	$(FUZZ_CC) $(FUZZ_FLAGS) -I$(LLHTTP_INC) -o $@ $< shim/framer.c $(FUZZ_LLHTTP_OBJS)

build/fuzz-replay/fuzz_llhttp: tests/fuzz/fuzz_llhttp.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(LLHTTP_OBJS) build/san/shim/framer.o Makefile
	@mkdir -p build/fuzz-replay
	$(CC) $(ALLFLAGS) -I$(LLHTTP_INC) $(SAN) -o $@ $< tests/fuzz/replay.c build/san/shim/framer.o $(LLHTTP_OBJS)

fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	python3 tests/fuzz/seeds.py tests/corpus build/fuzz/seeds
	@for f in $(FUZZ_NAMES); do \
		mkdir -p build/fuzz/corpus/$$f build/fuzz/crashes/$$f; \
		echo "== fuzz_$$f for $(FUZZ_SECONDS) s"; \
		build/fuzz/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=build/fuzz/crashes/$$f/ \
			build/fuzz/corpus/$$f build/fuzz/seeds/$$f || exit 1; \
	done

# each library source compiled alone, for the structure checks of
# docs/structure.md (tests/structure.py: exports, self-calls, the cycle)
STRUCT_OBJS := $(patsubst %.c,build/obj/%.o,$(SRCS))

build/obj/%.o: %.c Makefile debian/changelog
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -MMD -MP -c -o $@ $<

# what each object includes, as the compiler found it
-include $(patsubst %.c,build/obj/%.d,$(SRCS)) $(patsubst %.c,build/san/%.d,$(SRCS))

unit: $(UNIT_BINS) $(REPLAY_BINS) $(LIB) $(STRUCT_OBJS)
	python3 tests/structure.py $(LIB) build/obj
	@for t in $(UNIT_BINS); do echo "== $$t"; $$t || exit 1; done
	python3 tests/servers/render_cases.py --check
	@python3 tests/fuzz/seeds.py tests/corpus build/fuzz-replay/seeds >/dev/null
	@for f in $(FUZZ_NAMES); do build/fuzz-replay/fuzz_$$f build/fuzz-replay/seeds/$$f || exit 1; done

clients: $(CLIENT_BINS)

# The bats files run in parallel, JOBS tests at a time (GNU parallel, from
# scripts/deps): the tests mostly wait on servers, idle timers and
# interpreters' start-up, so four times the cores keeps 2 cores busy.
# (Until the pool's learnt idle cap could grow back, tests/methods.bats'
# reuse count under a random idle timer depended on the load, and this
# was twice the cores.)
JOBS ?= $(shell echo $$(( $(NPROC) * 4 )))
# (without GNU parallel installed, one at a time)
BATS := bats $(if $(filter-out 0 1,$(JOBS)),$(if $(shell command -v parallel),--jobs $(JOBS))) $(BATS_FLAGS)
# what the tests build on demand, built before they run (two files must
# not build the same target at once)
BATS_DEPS := $(LIB) $(AUDIT_LIB) $(BROKER) $(RUNNER) $(WRAPPER) $(TSAN_LIB) build/libkeepalive-noprobe.so \
	build/latency-proxy clients

bats: $(BATS_DEPS)
	$(BATS) tests/*.bats

# the TLS configuration-pair fuzzer (tests/https_pairs.bats) for longer:
# make tls-pairs PAIRS=20000 SEED=7
PAIRS ?= 20000
SEED ?= 7
tls-pairs: $(LIB) clients
	TLS_PAIRS=$(PAIRS) TLS_PAIRS_SEED=$(SEED) bats tests/https_pairs.bats

# everything: the unit tests, the suites against the library, and the
# suites again against its ASan+UBSan build (ASAN_BATS).  What they need is
# built first, NPROC compilers at a time (a minute and a half of compiling
# one at a time: four builds of the library, the sanitized unit tests and
# fuzz replayers); then they run one after the other.
TEST_DEPS := $(LIB) $(ASAN_LIB) $(UNIT_BINS) $(REPLAY_BINS) $(STRUCT_OBJS) $(BATS_DEPS)

test:
	$(MAKE) -j$(NPROC) $(TEST_DEPS)
	$(MAKE) unit bats test-asan

# day to day: the unit tests and the bats suites, without the ASan pass
check:
	$(MAKE) -j$(NPROC) $(filter-out $(ASAN_LIB),$(TEST_DEPS))
	$(MAKE) unit bats

# The ASan pass runs the files where the ASan+UBSan build of the library
# runs: every file that preloads it.  Left out, as nothing there can
# differ: tests/bench.bats (the benchmark scripts measure the plain build;
# every test skips under ASan), tests/proxy.bats (the latency proxy, no
# library at all), tests/package.bats (packaging).
ASAN_BATS := $(filter-out tests/bench.bats tests/proxy.bats tests/package.bats,$(wildcard tests/*.bats))

test-asan: $(ASAN_LIB) $(BATS_DEPS)
	KEEPALIVE_ASAN=1 KEEPALIVE_PRELOAD="$$($(CC) -print-file-name=libasan.so) $(CURDIR)/$(ASAN_LIB)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1 $(BATS) $(ASAN_BATS)

# make install [PREFIX=/usr/local] [DESTDIR=] [LIBDIR=] ...: the libraries
# and the helpers in one private directory (as torsocks and faketime keep
# theirs: a preload library is no shared library for the linker's path);
# the installed keepalive finds it relative to itself.  make uninstall
# [same variables] removes what install wrote (docs/wrapper.md).
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib/keepalive
HELPERDIR ?= $(LIBDIR)
MANDIR ?= $(PREFIX)/share/man
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
relpath = $(shell realpath -m -s --relative-to=$(1) $(2))

# the wrapper: its C entry point and its shell part live with the helpers
# (the shell part told where the libraries are, relative to itself), and
# BINDIR/keepalive is a relative link to the entry point, which finds the
# rest beside its own resolved path (docs/wrapper.md)
install: $(LIB) $(AUDIT_LIB) $(BROKER) $(RUNNER) $(WRAPPER)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(HELPERDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(USERUNITDIR)
	install -m 0644 $(LIB) $(DESTDIR)$(LIBDIR)/libkeepalive.so
	install -m 0644 $(AUDIT_LIB) $(DESTDIR)$(LIBDIR)/libkeepalive-audit.so
	sed -e 's|^libdir=.*|libdir=$(call relpath,$(HELPERDIR),$(LIBDIR))|' \
		-e 's|^helperdir=.*|helperdir=.|' \
		scripts/keepalive.sh >$(DESTDIR)$(HELPERDIR)/keepalive.sh
	chmod 0755 $(DESTDIR)$(HELPERDIR)/keepalive.sh
	install -m 0755 scripts/compare $(BROKER) $(RUNNER) $(WRAPPER) $(DESTDIR)$(HELPERDIR)/
	ln -sfn $(call relpath,$(BINDIR),$(HELPERDIR)/keepalive) $(DESTDIR)$(BINDIR)/keepalive
	install -m 0644 man/keepalive.1 $(DESTDIR)$(MANDIR)/man1/keepalive.1
	install -m 0644 man/libkeepalive.7 $(DESTDIR)$(MANDIR)/man7/libkeepalive.7
	install -m 0644 scripts/systemd/keepalive-broker.socket $(DESTDIR)$(USERUNITDIR)/
	sed 's|^ExecStart=.*|ExecStart=$(HELPERDIR)/keepalive-broker|' \
		scripts/systemd/keepalive-broker.service >$(DESTDIR)$(USERUNITDIR)/keepalive-broker.service

# the directories install may have made, deepest first: each removed when
# empty (never one that holds anything else)
INSTALL_DIRS = $(HELPERDIR) $(LIBDIR) $(USERUNITDIR) $(patsubst %/,%,$(dir $(USERUNITDIR))) \
	$(MANDIR)/man1 $(MANDIR)/man7 $(MANDIR) $(BINDIR)
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/keepalive \
		$(DESTDIR)$(LIBDIR)/libkeepalive.so $(DESTDIR)$(LIBDIR)/libkeepalive-audit.so \
		$(DESTDIR)$(HELPERDIR)/compare $(DESTDIR)$(HELPERDIR)/keepalive-broker \
		$(DESTDIR)$(HELPERDIR)/keepalive-run $(DESTDIR)$(HELPERDIR)/keepalive \
		$(DESTDIR)$(HELPERDIR)/keepalive.sh \
		$(DESTDIR)$(MANDIR)/man1/keepalive.1 $(DESTDIR)$(MANDIR)/man7/libkeepalive.7 \
		$(DESTDIR)$(USERUNITDIR)/keepalive-broker.socket $(DESTDIR)$(USERUNITDIR)/keepalive-broker.service
	@for d in $(INSTALL_DIRS); do \
		[ ! -d "$(DESTDIR)$$d" ] || rmdir --ignore-fail-on-non-empty "$(DESTDIR)$$d"; \
	done

clean:
	rm -rf build

# the process-shape matrix of docs/owner.md at a larger depth than make
# test's 6 (DEPTH=7: 5,564 shapes as root, about ten minutes)
DEPTH ?= 7
owner-matrix: $(LIB)
	tests/owner_matrix.sh $(DEPTH)

# instructions an untracked call and start-up cost (callgrind)
bench-fastpath: $(LIB) build/fastpath-loop
	scripts/bench-fastpath $(LIB)

# instructions per request with and without the library, and the library's
# functions per request (callgrind; docs/cost.md)
bench-cost: $(LIB) build/clients/httpget
	scripts/bench-cost $(LIB)

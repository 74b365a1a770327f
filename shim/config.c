/*
 * config.c - KEEPALIVE_* settings, the debug log and the exit statistics.
 * Bad values get a one-line warning and the default: never a crash.
 */
#include "config.h"
#include "real.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

struct kp_config kp_cfg = { .log_fd = 2 };
struct kp_stats kp_stats;
/* KEEPALIVE_STATS_FILE, copied: the program may change its environment */
static char stats_path[4096];
/* KEEPALIVE_LOG_FILE, and the file its fd is open on: the program may
 * close our fd (closefrom, close_range) and get its number for a file of
 * its own, so each write checks the number still holds our file first,
 * and opens it again when not (the number is the program's then). */
static char log_path[4096];
static dev_t log_dev;
static ino_t log_ino;

static int log_open(void)
{
	int fd = KP_REAL(open)(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		KP_REAL(close)(fd);
		return -1;
	}
	log_dev = st.st_dev;
	log_ino = st.st_ino;
	__atomic_store_n(&kp_cfg.log_fd, fd, __ATOMIC_RELEASE);
	return fd;
}

/* where a log line goes: stderr, or our file (-1: nowhere now) */
static int log_fd(void)
{
	int fd = __atomic_load_n(&kp_cfg.log_fd, __ATOMIC_ACQUIRE);
	if (!log_path[0])
		return fd;
	struct stat st;
	if (fstat(fd, &st) == 0 && st.st_dev == log_dev && st.st_ino == log_ino)
		return fd;
	return log_open();
}

static const char *prog_name(void)
{
	extern char *program_invocation_short_name;
	return program_invocation_short_name ? program_invocation_short_name : "?";
}

/* Always say something, whatever KEEPALIVE_LOG says: a bad setting. */
static void warn_setting(const char *name, const char *value, const char *used)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "libkeepalive: ignoring %s=%s (%s)\n", name, value, used);
	if (n > 0)
		KP_REAL(write)(log_fd(), line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

void kp_log_write(int level, const char *func, const char *fmt, ...)
{
	static const char *names[] = { "off", "error", "warn", "info", "debug" };
	char line[1024];
	int saved = errno;
	int n = snprintf(line, sizeof(line), "libkeepalive[%s:%d] %s %s: ", prog_name(), (int)getpid(),
			 names[level], func);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > 0) {
		size_t len = (size_t)n < sizeof(line) - 1 ? (size_t)n : sizeof(line) - 2;
		line[len++] = '\n';
		KP_REAL(write)(log_fd(), line, len);
	}
	errno = saved;
}

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* The KEEPALIVE_* variables the library reads, found in one pass over the
 * environment: getenv() for each walked it a dozen times at every start. */
#define KP_ENV(X) \
	X(LOG_FILE) \
	X(LOG) \
	X(DISABLE) \
	X(STATS) \
	X(STATS_FILE) \
	X(OBSERVE) \
	X(PORTS) \
	X(BROKER) \
	X(BROKER_TIMEOUT_MS) \
	X(IDLE_MS) \
	X(QUIET_MS) \
	X(REPLAY_MAX) \
	X(METHODS) \
	X(MAX_IDLE_PER_HOST) \
	X(MAX_IDLE) \
	X(TLS_ACROSS)
#define KP_ENV_ENUM(name) E_##name,
enum { KP_ENV(KP_ENV_ENUM) ENV_N };
#define KP_ENV_NAME(name) "KEEPALIVE_" #name,
static const char *const env_names[ENV_N] = { KP_ENV(KP_ENV_NAME) };
static const char *env_vals[ENV_N];

static void env_scan(void)
{
	extern char **environ;
	for (char **e = environ; e && *e; e++) {
		const char *v = *e;
		if (v[0] != 'K' || strncmp(v, "KEEPALIVE_", 10) != 0)
			continue;
		for (size_t i = 0; i < ENV_N; i++) {
			size_t n = strlen(env_names[i]);
			/* the first of a name wins, as with getenv() */
			if (!strncmp(v, env_names[i], n) && v[n] == '=') {
				if (!env_vals[i])
					env_vals[i] = v + n + 1;
				break;
			}
		}
	}
}

/* getenv("KEEPALIVE_" #name) as it was when env_scan() ran */
#define env(name) env_vals[E_##name]

static void env_u64(int i, uint64_t min, uint64_t max, uint64_t *val)
{
	const char *name = env_names[i], *s = env_vals[i];
	if (!s)
		return;
	if (parse_u64(s, min, max, val) < 0) {
		char used[64];
		snprintf(used, sizeof(used), "want %llu..%llu, using %llu", (unsigned long long)min,
			 (unsigned long long)max, (unsigned long long)*val);
		warn_setting(name, s, used);
	}
}

/* A switch: 1|on|yes|true or 0|off|no|false (unset or empty: off); any
 * other value is said and read as UNKNOWN (KEEPALIVE_DISABLE=please
 * disables: what its writer meant; KEEPALIVE_STATS=maybe does not count) */
static bool env_bool(int i, bool unknown)
{
	static const char *const on[] = { "1", "on", "yes", "true" }, *const off[] = { "0", "off", "no", "false" };
	const char *s = env_vals[i];
	if (!s || !*s)
		return false;
	for (size_t k = 0; k < sizeof(on) / sizeof(on[0]); k++) {
		if (!strcasecmp(s, on[k]))
			return true;
		if (!strcasecmp(s, off[k]))
			return false;
	}
	warn_setting(env_names[i], s, unknown ? "want 1|on|yes|true or 0|off|no|false, using 1" :
						"want 1|on|yes|true or 0|off|no|false, using 0");
	return unknown;
}

int kp_parse_ports(const char *s, uint8_t *bitmap)
{
	memset(bitmap, 0, 65536 / 8);
	while (*s) {
		char *end;
		if (*s < '0' || *s > '9')
			return -1;
		unsigned long lo = strtoul(s, &end, 10), hi = lo;
		if (*end == '-') {
			s = end + 1;
			if (*s < '0' || *s > '9')
				return -1;
			hi = strtoul(s, &end, 10);
		}
		if (lo == 0 || lo > hi || hi > 65535)
			return -1;
		for (unsigned long p = lo; p <= hi; p++)
			bitmap[p >> 3] |= (uint8_t)(1u << (p & 7));
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return 0;
}

static int parse_level(const char *s)
{
	static const char *names[] = { "off", "error", "warn", "info", "debug" };
	for (int i = 0; i <= KP_LOG_DEBUG; i++)
		if (!strcmp(s, names[i]) || (s[0] == '0' + i && !s[1]))
			return i;
	if (!strcmp(s, "1") || !strcmp(s, "true"))
		return KP_LOG_INFO;
	return -1;
}

/* KEEPALIVE_BROKER: a socket path, or 1 for the per-user default (where
 * keepalive-broker listens by default). */
static void broker_path(const char *s)
{
	char *p = kp_cfg.broker_path;
	size_t cap = sizeof(kp_cfg.broker_path);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char run[64];
	struct stat st;
	int n;
	/* as keepalive-broker's default: without XDG_RUNTIME_DIR (cron), the
	 * session's /run/user/UID when ours and closed to others
	 * (docs/wrapper.md); the socket's directory is checked when used */
	snprintf(run, sizeof(run), "/run/user/%u", (unsigned)geteuid());
	if (!strcmp(s, "1") && !(xdg && *xdg == '/') && lstat(run, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_uid == geteuid() && !(st.st_mode & 077))
		xdg = run;
	if (!strcmp(s, "1") && xdg && *xdg == '/')
		n = snprintf(p, cap, "%s/keepalive/broker.sock", xdg);
	else if (!strcmp(s, "1"))
		n = snprintf(p, cap, "/tmp/keepalive-%u/broker.sock", (unsigned)geteuid());
	else
		n = snprintf(p, cap, "%s", s);
	if (n < 0 || (size_t)n >= cap || p[0] != '/') {
		warn_setting("KEEPALIVE_BROKER", s, "want an absolute socket path shorter than 108 bytes, or 1");
		p[0] = 0;
	}
}

/* 80,443,8080,8443 (what the warnings below name), into an empty bitmap */
static void set_default_ports(uint8_t *bitmap)
{
	static const uint16_t ports[] = { 80, 443, 8080, 8443 };
	for (size_t i = 0; i < sizeof(ports) / sizeof(ports[0]); i++)
		bitmap[ports[i] >> 3] |= (uint8_t)(1u << (ports[i] & 7));
}

void kp_config_load(void)
{
	const char *s;
	uint64_t v;

	kp_cfg.idle_ms = 30000;
	kp_cfg.max_idle_per_dest = 16;
	kp_cfg.max_idle_total = 64;
	kp_cfg.quiet_ms = 2000;
	kp_cfg.any_method = true;
	kp_cfg.replay_max = 65536;
	set_default_ports(kp_cfg.ports);

	/* torsocks' rule: a setuid/setgid process does not obey the caller's
	 * environment.  We go further and step aside entirely. */
	if (getauxval(AT_SECURE)) {
		kp_cfg.disabled = true;
		return;
	}
	env_scan();
	if ((s = env(LOG_FILE)) && *s) {
		if (strlen(s) < sizeof(log_path)) {
			strcpy(log_path, s);
			if (log_open() < 0)
				log_path[0] = '\0';
		}
		if (!log_path[0])
			warn_setting("KEEPALIVE_LOG_FILE", s, "cannot open it, logging to stderr");
	}
	if ((s = env(LOG)) && *s) {
		int level = parse_level(s);
		if (level < 0)
			warn_setting("KEEPALIVE_LOG", s, "want off|error|warn|info|debug, using warn");
		kp_cfg.log_level = level < 0 ? KP_LOG_WARN : level;
	} else {
		kp_cfg.log_level = KP_LOG_WARN;
	}
	kp_cfg.disabled = env_bool(E_DISABLE, true);
	kp_cfg.stats = env_bool(E_STATS, false);
	if ((s = env(STATS_FILE)) && *s) {
		if (strlen(s) < sizeof(stats_path)) {
			strcpy(stats_path, s);
			kp_cfg.stats = true;
		} else {
			warn_setting("KEEPALIVE_STATS_FILE", s, "too long, ignored");
		}
	}
	kp_cfg.observe = env_bool(E_OBSERVE, false);
	kp_cfg.tls_across = env_bool(E_TLS_ACROSS, false);
	/* a bad or empty list never widens what is pooled: nothing is
	 * (docs/wrapper.md; the wrapper says it once for a command tree) */
	if ((s = env(PORTS)) && (!*s || kp_parse_ports(s, kp_cfg.ports) < 0)) {
		warn_setting("KEEPALIVE_PORTS", s, "want e.g. 80,8080,9000-9010; pooling nothing");
		memset(kp_cfg.ports, 0, sizeof(kp_cfg.ports));
	}
	if ((s = env(BROKER)) && *s && strcmp(s, "0") != 0)
		broker_path(s);
	kp_cfg.broker_timeout_ms = 100;
	env_u64(E_BROKER_TIMEOUT_MS, 1, 10000, &kp_cfg.broker_timeout_ms);
	env_u64(E_IDLE_MS, 1, 24ull * 3600 * 1000, &kp_cfg.idle_ms);
	env_u64(E_QUIET_MS, 10, 600000, &kp_cfg.quiet_ms);
	env_u64(E_REPLAY_MAX, 0, 16u << 20, &kp_cfg.replay_max);
	if ((s = env(METHODS)) && *s) {
		if (!strcmp(s, "idempotent"))
			kp_cfg.any_method = false;
		else if (strcmp(s, "all") != 0)
			warn_setting("KEEPALIVE_METHODS", s, "want all|idempotent, using all");
	}
	v = kp_cfg.max_idle_per_dest;
	env_u64(E_MAX_IDLE_PER_HOST, 0, 65536, &v);
	kp_cfg.max_idle_per_dest = (unsigned)v;
	v = kp_cfg.max_idle_total;
	env_u64(E_MAX_IDLE, 0, 65536, &v);
	kp_cfg.max_idle_total = (unsigned)v;
}

/* One line per process: to stderr, or appended to KEEPALIVE_STATS_FILE in
 * a single write (O_APPEND: the lines of a process tree never interleave).
 * The file is opened only now: a program may have closed or reused any fd
 * we could have kept open since start-up. */
void kp_stats_print(void)
{
	char line[512];
	size_t n = 0;
	if (stats_path[0])
		n += (size_t)snprintf(line, sizeof(line), "libkeepalive[%s:%d]:", prog_name(), (int)getpid());
	else
		n += (size_t)snprintf(line, sizeof(line), "libkeepalive:");
#define KP_STAT_PRINT(name)                                                                          \
	if (n < sizeof(line))                                                                        \
		n += (size_t)snprintf(line + n, sizeof(line) - n, " %s=%llu", #name,                 \
				      (unsigned long long)__atomic_load_n(&kp_stats.name, __ATOMIC_RELAXED));
	KP_STATS(KP_STAT_PRINT)
#undef KP_STAT_PRINT
	/* last: what parses the counters by position keeps working */
	if (n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n, " version=%s", KP_VERSION);
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	int fd = 2;
	if (stats_path[0]) {
		fd = KP_REAL(open)(stats_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			fd = 2;
	}
	KP_REAL(write)(fd, line, n);
	if (fd != 2)
		KP_REAL(close)(fd);
}

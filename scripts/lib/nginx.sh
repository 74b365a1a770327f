# nginx.sh - start and stop a private nginx on loopback (sourced by the
# demo and by tests/helpers.bash).  Nothing outside its own folder is used.
#
#   nginx_local_start DIR   -> serves DIR/www on 127.0.0.1 and [::1] at a
#                              free port, sets NGINX_PORT, logs one line per
#                              request to DIR/access.log:
#                              "$connection $connection_requests $request_method $uri $status"
#   nginx_local_stop DIR

nginx_local_free_port() {
	local port
	for _ in $(seq 1 50); do
		port=$((20000 + RANDOM % 12000)) # below the ephemeral range
		if ! ss -Htan "( sport = :$port )" 2>/dev/null | grep -q .; then
			echo "$port"
			return 0
		fi
	done
	return 1
}

nginx_local_start() {
	local dir=$1 extra=${2:-}
	mkdir -p "$dir/www"
	# nginx workers run as nobody when started as root (DESIGN 8): run
	# them as us instead, so a private 0700 temp dir still works
	chmod 755 "$dir" "$dir/www"
	NGINX_PORT=$(nginx_local_free_port) || return 1
	local user_line=""
	[ "$(id -u)" = 0 ] && user_line="user root;"
	cat >"$dir/nginx.conf" <<CONF
$user_line
worker_processes 1;
daemon on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  default_type text/plain;
  log_format conns '\$connection \$connection_requests \$request_method \$uri \$status';
  access_log $dir/access.log conns;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  client_body_temp_path $dir/tmp_body;
  proxy_temp_path $dir/tmp_proxy;
  fastcgi_temp_path $dir/tmp_fastcgi;
  uwsgi_temp_path $dir/tmp_uwsgi;
  scgi_temp_path $dir/tmp_scgi;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    listen [::1]:$NGINX_PORT;
    root $dir/www;
    $extra
  }
}
CONF
	nginx -c "$dir/nginx.conf" -p "$dir" -e "$dir/error.log" || return 1
	local i
	for i in $(seq 1 100); do
		[ -s "$dir/nginx.pid" ] && ss -Hltn "( sport = :$NGINX_PORT )" | grep -q . && return 0
		sleep 0.05
	done
	echo "nginx did not start on $NGINX_PORT" >&2
	return 1
}

nginx_local_stop() {
	local dir=$1 pid
	[ -s "$dir/nginx.pid" ] || return 0
	pid=$(cat "$dir/nginx.pid")
	kill -QUIT "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
}

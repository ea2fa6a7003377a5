# Real smart-HTTP git upstreams for the integration tests, sourced after
# lib.sh: nginx (Debian's, run as root with a private prefix under $T) in
# front of fcgiwrap and `git http-backend`, serving bare repositories under
# $T/remote on 127.0.0.1 over plain HTTP and over HTTPS with a CA the test
# generates. Requests are authorised either by `auth_basic` against an
# htpasswd file (static credentials) or by `auth_request` to a URL the test
# gives (engineer A's GitHub stand-in answers `/_auth`).
#
#   make_remote NAME            bare repo acme/NAME.git with one commit on main
#   remote_ref NAME REF         a ref's id in it ("" when absent)
#   start_http_upstream MODE [AUTH_URL]
#                               MODE basic: htpasswd user $REMOTE_USER with
#                               password $REMOTE_SECRET; MODE auth_request:
#                               every request is checked by a subrequest to
#                               AUTH_URL (e.g. http://127.0.0.1:PORT/_auth) with
#                               X-Original-URI and X-Original-Method set.
#                               Sets HTTP_URL, HTTPS_URL, NGINX_DIR.
#   remote_upstream_json HOST URL [EXTRA_MEMBERS]
#                               an "upstreams" entry with static credentials
#                               (token file $T/remote.secret)
#   write_remote_config RULES UPSTREAMS_JSON_ARRAY [EXTRA_TOP_LEVEL]
#   use_remote_token TOKEN HOST [URL]
#                               pushes and fetches of URL/... (default
#                               $HTTP_URL) go through the gateway's /HOST/
#   remote_work NAME DIR [URL]  a working clone whose origin is URL/acme/NAME.git
#   make_ca NAME                a CA in $T/ca-NAME.{key,pem}
# Tests that need nginx or fcgiwrap and lack them skip (exit 77).

for bin in nginx fcgiwrap openssl python3; do
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] ||
    { echo "SKIP: $bin not installed (scripts/lib.sh installs it)"; exit 77; }
done
export PATH=$PATH:/usr/sbin
GIT_HTTP_BACKEND=$(git --exec-path)/git-http-backend
[ -x "$GIT_HTTP_BACKEND" ] || { echo "SKIP: no git-http-backend"; exit 77; }
nginx -V 2>&1 | grep -q -- --with-http_auth_request_module ||
  { echo "SKIP: this nginx lacks auth_request"; exit 77; }

NGINX_DIR=$T/nginx
REMOTE_USER=pusher
REMOTE_SECRET=static-secret-$RANDOM$RANDOM$RANDOM
NGINX_PID= FCGI_PID=
mkdir -p "$T/remote/acme" "$NGINX_DIR"

# fcgiwrap runs in a session of its own so that its preforked workers go
# with it: killing only the first would leave them behind.
http_cleanup() {
  [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null || true
  [ -n "$FCGI_PID" ] && kill -- "-$FCGI_PID" 2>/dev/null || true
  [ -n "$NGINX_PID" ] && wait "$NGINX_PID" 2>/dev/null || true
  [ -n "$FCGI_PID" ] && wait "$FCGI_PID" 2>/dev/null || true
  NGINX_PID= FCGI_PID=
}
cleanup() {
  stop_gateway
  http_cleanup
  [ "$(type -t extra_cleanup)" = function ] && extra_cleanup
  rm -rf "$T"
}

# free_port: a TCP port nothing listens on right now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT: until something accepts on it (5 s at most).
wait_port() {
  for _ in $(seq 1 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 0.2)" 2>/dev/null &&
      return 0
    sleep 0.05
  done
  fail "nothing listens on port $1"
}

make_remote() {
  local name=$1 bare=$T/remote/acme/$1.git seed=$T/rseed-$1
  git init -q --bare "$bare"
  git -C "$bare" config http.receivepack true
  git init -q "$seed"
  echo "# $name" >"$seed/README.md"
  git -C "$seed" add README.md
  git -C "$seed" commit -q -m "Initial commit"
  git -C "$seed" push -q "$bare" main
  rm -rf "$seed"
}

remote_ref() { git --git-dir="$T/remote/acme/$1.git" rev-parse --verify -q "$2" || true; }

# make_ca NAME: a self-signed CA, $T/ca-NAME.key and $T/ca-NAME.pem.
make_ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=refgate test CA $1" \
    -keyout "$T/ca-$1.key" -out "$T/ca-$1.pem" 2>/dev/null
}

# server_cert CA: a certificate for 127.0.0.1 signed by CA, in $NGINX_DIR.
server_cert() {
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$NGINX_DIR/server.key" -out "$NGINX_DIR/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$NGINX_DIR/san.ext"
  openssl x509 -req -in "$NGINX_DIR/server.csr" -CA "$T/ca-$1.pem" -CAkey "$T/ca-$1.key" \
    -CAcreateserial -days 2 -extfile "$NGINX_DIR/san.ext" -out "$NGINX_DIR/server.pem" 2>/dev/null
}

start_http_upstream() {
  local mode=$1 auth_url=${2:-} port tls_port auth
  http_cleanup
  port=$(free_port)
  tls_port=$(free_port)
  [ -f "$T/ca-test.pem" ] || make_ca test
  server_cert test
  mkdir -p "$NGINX_DIR/tmp"
  case $mode in
    basic)
      printf '%s:%s\n' "$REMOTE_USER" "$(openssl passwd -apr1 "$REMOTE_SECRET")" >"$NGINX_DIR/htpasswd"
      auth="auth_basic \"git\"; auth_basic_user_file $NGINX_DIR/htpasswd;"
      ;;
    auth_request)
      [ -n "$auth_url" ] || fail "auth_request mode needs the auth URL"
      auth="auth_request /_auth;"
      ;;
    *) fail "unknown upstream mode $mode" ;;
  esac
  cat >"$NGINX_DIR/nginx.conf" <<CONF
daemon off;
user root;
worker_processes 1;
pid $NGINX_DIR/nginx.pid;
error_log $NGINX_DIR/error.log info;
events { worker_connections 256; }
http {
  # What reached upstream: every request, and (apart) every Authorization
  # header it carried, so tests can say which credential came.
  log_format req '\$request_method \$request_uri \$status \$request_length';
  log_format auth '\$request_method \$request_uri \$http_authorization';
  access_log $NGINX_DIR/access.log req;
  access_log $NGINX_DIR/auth.log auth;
  client_body_temp_path $NGINX_DIR/tmp/body;
  fastcgi_temp_path $NGINX_DIR/tmp/fastcgi;
  proxy_temp_path $NGINX_DIR/tmp/proxy;
  uwsgi_temp_path $NGINX_DIR/tmp/uwsgi;
  scgi_temp_path $NGINX_DIR/tmp/scgi;
  # Pushes are large and chunked: no cap here, and nginx buffers the whole
  # body (to disk) before handing it to the FastCGI backend with a length.
  client_max_body_size 0;
  server {
    listen 127.0.0.1:$port;
    listen 127.0.0.1:$tls_port ssl;
    ssl_certificate $NGINX_DIR/server.pem;
    ssl_certificate_key $NGINX_DIR/server.key;
    location = /_auth {
      internal;
      proxy_pass ${auth_url:-http://127.0.0.1:9/_auth};
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI \$request_uri;
      proxy_set_header X-Original-Method \$request_method;
    }
    location / {
      $auth
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $GIT_HTTP_BACKEND;
      fastcgi_param GIT_PROJECT_ROOT $T/remote;
      fastcgi_param GIT_HTTP_EXPORT_ALL 1;
      fastcgi_param PATH_INFO \$uri;
      fastcgi_param REMOTE_USER \$remote_user;
      fastcgi_read_timeout 600s;
      # Answers stream to the client as http-backend writes them.
      fastcgi_buffering off;
      fastcgi_pass unix:$NGINX_DIR/fcgi.sock;
    }
  }
}
CONF
  rm -f "$NGINX_DIR/fcgi.sock"
  setsid fcgiwrap -c 4 -s "unix:$NGINX_DIR/fcgi.sock" 2>>"$NGINX_DIR/fcgiwrap.log" &
  FCGI_PID=$!
  nginx -p "$NGINX_DIR" -c "$NGINX_DIR/nginx.conf" 2>>"$NGINX_DIR/error.log" &
  NGINX_PID=$!
  wait_port "$port"
  wait_port "$tls_port"
  for _ in $(seq 1 100); do [ -S "$NGINX_DIR/fcgi.sock" ] && break; sleep 0.05; done
  HTTP_URL=http://127.0.0.1:$port
  HTTPS_URL=https://127.0.0.1:$tls_port
}

# remote_upstream_json HOST URL [EXTRA_MEMBERS]: static credentials.
remote_upstream_json() {
  [ -f "$T/remote.secret" ] || { printf '%s' "$REMOTE_SECRET" >"$T/remote.secret"; chmod 600 "$T/remote.secret"; }
  printf '{"host": "%s", "url": "%s", "credentials": {"type": "static", "username": "%s", "token_file": "%s"}, "connect_timeout": 5, "idle_timeout": 10%s}' \
    "$1" "$2" "$REMOTE_USER" "$T/remote.secret" "${3:+, $3}"
}

# write_remote_config RULES UPSTREAMS [EXTRA_TOP_LEVEL]: a local upstream
# ("local", $T/upstream) plus the given remote ones.
write_remote_config() {
  mkdir -p "$T/upstream"
  cat >"$T/refgate.json" <<JSON
{
  "listen": "127.0.0.1:0",
  "state_dir": "state",
  ${3:+$3,}
  "upstreams": [{"host": "local", "url": "file://$T/upstream"}, $2],
  "rules": $1
}
JSON
}

# use_remote_token TOKEN HOST [URL]: git talks to URL (default $HTTP_URL)
# only through the gateway's /HOST/, pushes and fetches alike, as a run
# whose only network is the gateway would.
use_remote_token() {
  export REFGATE_TOKEN=$1
  export GIT_CONFIG_COUNT=2
  export GIT_CONFIG_KEY_0="url.$GW/$2/.insteadOf" GIT_CONFIG_VALUE_0="${3:-$HTTP_URL}/"
  export GIT_CONFIG_KEY_1=credential.helper
  export GIT_CONFIG_VALUE_1='!f() { test "$1" = get && echo username=run && echo "password=$REFGATE_TOKEN"; }; f'
}

# remote_work NAME DIR [URL]: a working clone made straight from the
# remote's directory, its origin then pointed at URL/acme/NAME.git (default
# $HTTP_URL), which use_remote_token routes through the gateway.
remote_work() {
  git clone -q "file://$T/remote/acme/$1.git" "$2"
  git -C "$2" remote set-url origin "${3:-$HTTP_URL}/acme/$1.git"
}

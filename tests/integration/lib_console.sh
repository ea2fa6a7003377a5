# Shared by the review console's tests: a gateway with the console on a
# port of its own, a reviewer account made through `refgate console user
# add`, a clone that pushes through the gateway, and curl helpers that
# speak to the console as a browser on its own origin would.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CFG=$T/refgate.json
REVIEWER=alice
REVIEWER_PASSWORD='correct horse battery'
# Attacker-chosen text the pages must show inert: run names may hold any
# printable ASCII but spaces; ref names may hold quotes and ampersands.
XSS_RUN='<img/src=x/onerror=document.title="pwned">'
XSS_REF="refs/heads/feature/x'onmouseover='alert(1)'&amp;<"
XSS_REF=${XSS_REF%<}
CONSOLE_RULES='[
  {"name": "protect-main", "refs": ["refs/heads/main"], "actions": ["update", "force", "delete"],
   "effect": "deny", "reason": "main is protected"},
  {"name": "features", "refs": ["refs/heads/feature/**"], "actions": ["create", "update"],
   "effect": "allow"},
  {"name": "release-tags", "refs": ["refs/tags/v*"], "actions": ["create"], "effect": "ask",
   "reason": "release tags need a maintainer"}
]'

# start_console: the gateway with a console on 127.0.0.1:0; sets CONSOLE
# (its URL) and CONSOLE_HOST (host:port).
start_console() {
  write_config "$CONSOLE_RULES" '"console": {"listen": "127.0.0.1:0"}'
  start_gateway
  for _ in $(seq 1 100); do [ -s "$T/state/console.url" ] && break; sleep 0.05; done
  load_console
}

# load_console: CONSOLE, CONSOLE_HOST and GW from the running gateway's
# files (each test runs in a subshell of its own).
load_console() {
  CONSOLE=$(cat "$T/state/console.url")
  CONSOLE_HOST=${CONSOLE#http://}
  GW=$(cat "$T/state/url")
}

add_reviewer() {
  printf '%s\n' "$REVIEWER_PASSWORD" | "$REFGATE" console user add --config "$CFG" "$REVIEWER"
}

# ccurl ARGS...: curl to the console with its own Host (curl's default).
ccurl() { curl -sS --max-time 20 "$@"; }

# status_of ARGS...: the HTTP status of one request.
status_of() { ccurl -o /dev/null -w '%{http_code}' "$@"; }

# login JAR: log in as the reviewer, keeping the session cookie in JAR;
# prints the session's CSRF token (read from the pushes page's forms).
login() {
  local jar=$1 csrf
  ccurl -c "$jar" -b "$jar" "$CONSOLE/login" >"$T/login.html"
  csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$T/login.html" | head -1 | cut -d'"' -f4)
  ccurl -c "$jar" -b "$jar" -o /dev/null -H "Origin: $CONSOLE" \
    --data-urlencode "csrf=$csrf" --data-urlencode "user=$REVIEWER" \
    --data-urlencode "password=$REVIEWER_PASSWORD" "$CONSOLE/login"
  ccurl -b "$jar" "$CONSOLE/pushes" | grep -o 'name="csrf" value="[0-9a-f]*"' | head -1 | cut -d'"' -f4
}

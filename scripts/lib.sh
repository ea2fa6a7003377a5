# Shared by scripts/demo and scripts/test: install what the build needs from
# Debian's packages (once), then configure and build into a build directory.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

PACKAGES=(
  build-essential cmake pkg-config git curl ca-certificates
  libgit2-dev libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libssl-dev zlib1g-dev
  libcriterion-dev clang libclang-rt-14-dev
  # CI checks every C file against .clang-format (check_format).
  clang-format
  xfsprogs e2fsprogs util-linux mount bubblewrap hyperfine procps python3 jq
  libseccomp-dev keyutils attr git-lfs
  nginx fcgiwrap openssl
  golang-go
  # tests/deploy: mandoc lints the man pages, strace and systemd-analyze
  # check the systemd unit against the gateway.
  mandoc strace systemd
  # The unsigned condition verifies with ssh-keygen and gpg.
  openssh-client gnupg
  # The review console: yescrypt for reviewer passwords; its browser tests
  # drive a headless Chromium with Selenium.
  libcrypt-dev chromium chromium-driver python3-selenium
  # The admin listener's /metrics is checked with Prometheus' own promtool.
  prometheus
  # Shared state of many gateways: libpq, and a real PostgreSQL the tests
  # start themselves (tests/support/pg.sh).
  libpq-dev postgresql
  # The multi-gateway tests put a load balancer in front of the gateways.
  haproxy
)
# The secret scanner's matcher (content/): Hyperscan is amd64-only in Debian;
# Vectorscan, its port, provides the same libhs API elsewhere.
if [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ]; then
  PACKAGES+=(libhyperscan-dev)
else
  PACKAGES+=(libvectorscan-dev)
fi

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  # nginx's maintainer scripts need the www-data account Debian's
  # base-passwd normally provides; some minimal images lack it.
  getent group www-data >/dev/null || "${sudo[@]}" groupadd -r www-data
  getent passwd www-data >/dev/null ||
    "${sudo[@]}" useradd -r -g www-data -d /var/www -s /usr/sbin/nologin www-data
  echo "==> installing: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# The real agent the end-to-end test runs under `refgate run`
# (tests/integration/test_run_agents.sh), pinned, from the npm registry.
# Not fatal: without it (no npm, no registry) that test says so and skips.
CLAUDE_CODE_VERSION=2.1.197
install_agents() {
  if command -v claude >/dev/null && claude --version 2>/dev/null | grep -q "^$CLAUDE_CODE_VERSION "; then
    return 0
  fi
  command -v npm >/dev/null || { echo "==> no npm: the Claude Code test will skip"; return 0; }
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "==> installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION (npm, global)"
  "${sudo[@]}" npm install -g --no-fund --no-audit --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" ||
    echo "==> could not install Claude Code: its test will skip"
}

# Fail, naming the files, when a tracked .c/.h is not as clang-format
# (the repo's .clang-format) would write it; `clang-format -i FILE` fixes one.
check_format() {
  local out rc=0 files
  mapfile -t files < <(git -C "$REPO" ls-files -- '*.c' '*.h')
  [ ${#files[@]} -gt 0 ] || return 0
  # Several files per clang-format, two at a time: the check takes seconds.
  out=$(cd "$REPO" && printf '%s\0' "${files[@]}" |
    xargs -0 -n 40 -P 2 clang-format --dry-run --Werror 2>&1) || rc=$?
  if [ $rc -ne 0 ]; then
    echo "==> not formatted (fix with clang-format -i FILE..., the repo's .clang-format):" >&2
    sed -n 's/^\([^:]*\.[ch]\):[0-9]*:[0-9]*: error: .*/  \1/p' <<<"$out" | sort -u >&2
    grep -q ': error: code should be clang-formatted' <<<"$out" || echo "$out" >&2
    return 1
  fi
  echo "==> formatting: ${#files[@]} C files as .clang-format says"
}

# build DIR [cmake options...]
build() {
  local dir=$1; shift
  cmake -S "$REPO" -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
}

# Sourced by the benchmark scripts: a scratch directory, and a directory served over HTTP on
# 127.0.0.1.
#
#   make_workdir                  sets work to a new temporary directory, removed (and the
#                                 server stopped) when the script exits.
#   start_static_server DIR LOG   starts `python3 -m http.server` on a free port serving DIR
#                                 (its output in LOG); sets server_pid and port, or exits 1.
start_static_server() {
  python3 -u -m http.server --bind 127.0.0.1 --directory "$1" 0 >"$2" 2>/dev/null &
  server_pid=$!
  port=""
  for _ in $(seq 1 100); do
    port="$(sed -n 's/.*port \([0-9][0-9]*\).*/\1/p' "$2" | head -n1)"
    [ -n "$port" ] && return 0
    sleep 0.05
  done
  echo "$(basename "$0"): the HTTP server did not start" >&2
  exit 1
}

make_workdir() {
  work="$(mktemp -d)"
  server_pid=""
  trap 'stop_workdir' EXIT
}

stop_workdir() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}

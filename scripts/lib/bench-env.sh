# Sourced by the daemon benchmarks (bench-daemon.sh, bench-cluster.sh): builds the release
# binary unless BENCH_NO_BUILD or BENCH_BIN is set, sets BIN to the binary to measure, and makes
# a clean environment: a temporary $work (removed on exit) as HOME, and none of the variables
# of the developer's shell that would change what the agent does.
[ -n "${BENCH_NO_BUILD:-}" ] || [ -n "${BENCH_BIN:-}" ] || cargo build --release --quiet
BIN="${BENCH_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/heartbeat-agent}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export HOME="$work"
unset HEARTBEAT_AGENT_CONFIG HEARTBEAT_AGENT_LOG NOTIFY_SOCKET WATCHDOG_USEC XDG_STATE_HOME

#!/usr/bin/env bash
# Fuzzes the emulator against its own OpenAPI document with schemathesis: no answer may be a
# 5xx, and every answer must have a documented status, content type and schema.
#
# Installs schemathesis with pip into a virtualenv under ~/.cache (needs network once), builds
# the binary, starts `heartbeat-agent emulator` on free ports with the example fixtures, runs
# schemathesis against the API listener and then the ping host, and stops the emulator.
#
# Environment: SCHEMATHESIS_VENV (default ~/.cache/heartbeat-agent/schemathesis-venv),
# EXAMPLES (examples per operation, default 100), SEED (hypothesis seed, default 1),
# TIME_LIMIT (seconds for each schemathesis run, default 600). Extra arguments go to
# `schemathesis run`. Not part of .ci/run: it installs from the network.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${SCHEMATHESIS_VENV:-$HOME/.cache/heartbeat-agent/schemathesis-venv}"
examples="${EXAMPLES:-100}"
seed="${SEED:-1}"
time_limit="${TIME_LIMIT:-600}"
key="schemathesis-api-key"
account="00000000-0000-4000-8000-000000000001"

if ! "$venv/bin/schemathesis" --version >/dev/null 2>&1; then
  echo "== installing schemathesis into $venv"
  python3 -m venv "$venv"
  # hypothesis 6.131 removed an internal (many.more) that schemathesis 3.x still uses.
  "$venv/bin/pip" install --quiet 'schemathesis>=3.39,<4' 'hypothesis>=6.108,<6.131'
fi
"$venv/bin/schemathesis" --version

echo "== building heartbeat-agent"
cargo build --quiet
target_dir="$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
binary="$target_dir/debug/heartbeat-agent"

workdir="$(mktemp -d)"
emulator_pid=""
cleanup() {
  if [ -n "$emulator_pid" ]; then
    kill -TERM "$emulator_pid" 2>/dev/null || true
    wait "$emulator_pid" 2>/dev/null || true
  fi
  rm -rf "$workdir"
}
trap cleanup EXIT

# A rate limit high enough that fuzzing reaches the handlers (429 is documented anyway).
"$binary" emulator --listen 127.0.0.1:0 --ping-listen 127.0.0.1:0 \
  --api-key "$key" --account "$account" --fixtures config/emulator-fixtures.json \
  --rate-limit 1000000/60 >"$workdir/urls" 2>"$workdir/emulator.log" &
emulator_pid=$!
for _ in $(seq 100); do
  grep -q '^ping_url=' "$workdir/urls" 2>/dev/null && break
  kill -0 "$emulator_pid" 2>/dev/null || { cat "$workdir/emulator.log" >&2; exit 1; }
  sleep 0.1
done
base_url="$(sed -n 's/^base_url=//p' "$workdir/urls")"
ping_url="$(sed -n 's/^ping_url=//p' "$workdir/urls")"
[ -n "$base_url" ] && [ -n "$ping_url" ] || { echo "the emulator printed no URLs" >&2; exit 1; }
echo "== emulator: $base_url (ping host $ping_url)"

# Header values that are not valid HTTP are filtered out: see scripts/schemathesis_hooks.py.
export PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}"
export SCHEMATHESIS_HOOKS=schemathesis_hooks
checks="not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
common=(
  --checks "$checks"
  --data-generation-method all
  --hypothesis-max-examples "$examples"
  --hypothesis-seed "$seed"
  --hypothesis-database none
  --hypothesis-suppress-health-check all
  --request-timeout 5000
  --output-truncate false
)

status=0
echo "== schemathesis: the API"
timeout "$time_limit" "$venv/bin/schemathesis" run "$base_url/openapi.json" \
  --base-url "$base_url" \
  -H "Authorization: Bearer $key" \
  --set-header "x-service-account=$account" \
  --exclude-path '/{pingToken}' \
  "${common[@]}" "$@" || status=$?

# Generated ids rarely name a resource, so the pass above mostly meets 404s. These passes pin
# the path to the example fixtures' resources, so generated bodies and queries reach the
# handlers and their 200 answers are checked against the document too.
check="7b3c1a52-0d5e-4f7a-9c1e-2f6d8b4a1001"
pinned=(
  "/v1/checks/heartbeat/{id}|id=$check"
  "/v1/checks/{id}|id=$check"
  "/v1/checks/heartbeats/{checkId}/events|checkId=$check"
  "/v2/check-groups/{id}|id=42"
  "/v1/check-groups/{id}|id=42"
  "/v1/maintenance-windows/{id}/maintenances/{maintenanceId}|id=7|maintenanceId=m-2026-12-01"
  "/v1/test-session-error-groups/projects/{projectId}|projectId=5f0c2f4e-8a51-4c7b-9f0a-3c2d1e0b9a77"
)
for entry in "${pinned[@]}"; do
  IFS='|' read -r -a parts <<<"$entry"
  set_path=()
  for assignment in "${parts[@]:1}"; do set_path+=(--set-path "$assignment"); done
  echo "== schemathesis: ${parts[0]} on a fixture resource"
  timeout "$time_limit" "$venv/bin/schemathesis" run "$base_url/openapi.json" \
    --base-url "$base_url" \
    -H "Authorization: Bearer $key" \
    --set-header "x-service-account=$account" \
    --include-path "${parts[0]}" "${set_path[@]}" \
    "${common[@]}" "$@" || status=$?
done

echo "== schemathesis: the ping host"
timeout "$time_limit" "$venv/bin/schemathesis" run "$base_url/openapi.json" \
  --base-url "$ping_url" \
  --include-path '/{pingToken}' \
  "${common[@]}" "$@" || status=$?

exit "$status"

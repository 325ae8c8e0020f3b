#!/usr/bin/env bash
# Fuzzes the emulator with schemathesis: no answer may be a 5xx, and every answer must have a
# documented status, content type and schema.
#
# Installs schemathesis with pip into a virtualenv under ~/.cache (needs network once), builds
# the binary, starts `heartbeat-agent emulator` on free ports with the example fixtures, runs
# schemathesis against the API listener and then the ping host, and stops the emulator.
#
# By default the document is the emulator's own (`GET /openapi.json`). With `--published PATH`
# (or PUBLISHED_OPENAPI=PATH) it is the service's published OpenAPI document instead
# (checkly/docs `api-reference/openapi.json`, not vendored: it is not ours): its raw control
# characters are cleaned and it is cut down to the operations the emulator implements
# (`published_operations` below; schemathesis 3.x reports unresolvable references of every
# operation, filtered or not, and two operations the emulator does not have carry some). A
# status the published document does not list passes only when it is one of the error
# statuses (400, 404, 415) the emulator's own document declares for the operation, with the
# error body (`scripts/schemathesis_hooks.py`); the ping host is not in it and is skipped.
#
# Environment: SCHEMATHESIS_VENV (default ~/.cache/heartbeat-agent/schemathesis-venv),
# EXAMPLES (examples per operation, default 100), SEED (hypothesis seed, default 1),
# TIME_LIMIT (seconds for each schemathesis run, default 600), PUBLISHED_OPENAPI. Extra
# arguments go to `schemathesis run`. Not part of .ci/run: it installs from the network.
set -euo pipefail
invoked_from="$PWD"
cd "$(dirname "$0")/.."

venv="${SCHEMATHESIS_VENV:-$HOME/.cache/heartbeat-agent/schemathesis-venv}"
examples="${EXAMPLES:-100}"
seed="${SEED:-1}"
time_limit="${TIME_LIMIT:-600}"
key="schemathesis-api-key"
account="00000000-0000-4000-8000-000000000001"
published="${PUBLISHED_OPENAPI:-}"
if [ "${1:-}" = "--published" ]; then
  [ -n "${2:-}" ] || { echo "--published needs the path of the published openapi.json" >&2; exit 2; }
  published="$2"
  shift 2
fi
case "$published" in "" | /*) ;; *) published="$invoked_from/$published" ;; esac
if [ -n "$published" ] && [ ! -r "$published" ]; then
  echo "cannot read the published OpenAPI document $published: get it with" \
    "git -C <checkly/docs clone> show HEAD:api-reference/openapi.json >openapi.json" >&2
  exit 2
fi
# The operations the emulator implements, by their ids in the published document (the ping
# host is not in it). Keep in step with docs/emulator.md ("The API").
published_operations=(
  postV1StatuspagesServices getV1StatuspagesServices
  getV1MaintenancewindowsIdMaintenancesMaintenanceid
  patchV1MaintenancewindowsIdMaintenancesMaintenanceid
  getV1ChecksId putV1ChecksHeartbeatId getV1Checks postV1ChecksHeartbeat deleteV1ChecksId
  getV1ChecksHeartbeatsCheckidEvents getV1ChecksHeartbeatsCheckidEventsId
  getV1CheckgroupsId putV2CheckgroupsId getV1Checkstatuses
  getV1TestsessionerrorgroupsProjectsProjectid deleteV1SnippetsId
)

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

# GET of a URL on the emulator, straight (no proxy from the environment).
local_get() {
  python3 -c 'import sys, urllib.request as u
sys.stdout.buffer.write(u.build_opener(u.ProxyHandler({})).open(sys.argv[1]).read())' "$1"
}

# Header values that are not valid HTTP are filtered out: see scripts/schemathesis_hooks.py.
export PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}"
export SCHEMATHESIS_HOOKS=schemathesis_hooks
# Hypothesis's caches go to the run's directory, not into the checkout.
export HYPOTHESIS_STORAGE_DIRECTORY="$workdir/hypothesis"
checks="not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
schema="$base_url/openapi.json"
# The account header: the emulator's document names it, the published one names its own.
account_args=(--set-header "x-service-account=$account")
include_api=(--exclude-path '/{pingToken}')
if [ -n "$published" ]; then
  schema="$workdir/published.json"
  python3 - "$published" "$schema" "${published_operations[@]}" <<'PY'
import json, sys
source, target, wanted = sys.argv[1], sys.argv[2], set(sys.argv[3:])
# The published text holds raw control characters inside strings, which strict JSON forbids.
with open(source, encoding="utf-8") as f:
    document = json.loads(f.read(), strict=False)
found = set()
for path in list(document["paths"]):
    item = document["paths"][path]
    for method in [m for m in item if m in ("get", "put", "post", "patch", "delete", "head", "options")]:
        if item[method].get("operationId") in wanted:
            found.add(item[method]["operationId"])
        else:
            del item[method]
    if not any(m in item for m in ("get", "put", "post", "patch", "delete", "head", "options")):
        del document["paths"][path]
# Errata, each printed: where the published document contradicts itself and the service.
event = document["components"]["schemas"].get("HeartbeatsV1Event", {}).get("properties", {})
if event.get("timestamp", {}).get("format") == "date":
    # Its description says "UTC timestamp on which we received the event"; the service, the
    # emulator and the client all use a date-time there.
    event["timestamp"]["format"] = "date-time"
    print("== erratum applied: HeartbeatsV1Event.timestamp format date -> date-time")
missing = sorted(wanted - found)
if missing:
    sys.exit(f"{source}: no operation with the id(s) {', '.join(missing)}; "
             "has the published document renamed them? Update published_operations in scripts/schemathesis.sh")
with open(target, "w", encoding="utf-8") as f:
    json.dump(document, f)
print(f"== published document {source}: {len(found)} operations kept")
PY
  local_get "$base_url/openapi.json" >"$workdir/emulator-openapi.json"
  export SCHEMATHESIS_EMULATOR_OPENAPI="$workdir/emulator-openapi.json"
  checks="not_a_server_error,status_code_published_or_emulator_error,content_type_conformance,response_schema_conformance"
  account_args=(-H "x-service-account: $account" --set-header "x-checkly-account=$account")
  include_api=()
  for operation in "${published_operations[@]}"; do include_api+=(--include-operation-id "$operation"); done
fi
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

# One ping of the first fixture check, so its events list and the event read answer an event
# (their schemas are checked only when there is one).
check="7b3c1a52-0d5e-4f7a-9c1e-2f6d8b4a1001"
event="$(local_get "$ping_url/3f2a9c1e-5b7d-4e8f-9a6b-1c2d3e4f5a01" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["eventId"])')"

status=0
echo "== schemathesis: the API"
timeout "$time_limit" "$venv/bin/schemathesis" run "$schema" \
  --base-url "$base_url" \
  -H "Authorization: Bearer $key" \
  "${account_args[@]}" \
  "${include_api[@]}" \
  "${common[@]}" "$@" || status=$?

# Generated ids rarely name a resource, so the pass above mostly meets 404s. These passes pin
# the path to the example fixtures' resources, so generated bodies and queries reach the
# handlers and their 200 answers are checked against the document too.
pinned=(
  "/v1/checks/heartbeat/{id}|id=$check"
  "/v1/checks/{id}|id=$check"
  "/v1/checks/heartbeats/{checkId}/events|checkId=$check"
  "/v1/checks/heartbeats/{checkId}/events/{id}|checkId=$check|id=$event"
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
  timeout "$time_limit" "$venv/bin/schemathesis" run "$schema" \
    --base-url "$base_url" \
    -H "Authorization: Bearer $key" \
    "${account_args[@]}" \
    --include-path "${parts[0]}" "${set_path[@]}" \
    "${common[@]}" "$@" || status=$?
done

if [ -n "$published" ]; then
  echo "== the ping host is not in the published document: not fuzzed in this run"
  exit "$status"
fi
echo "== schemathesis: the ping host"
timeout "$time_limit" "$venv/bin/schemathesis" run "$base_url/openapi.json" \
  --base-url "$ping_url" \
  --include-path '/{pingToken}' \
  "${common[@]}" "$@" || status=$?

exit "$status"

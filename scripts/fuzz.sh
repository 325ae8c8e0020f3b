#!/usr/bin/env bash
# Fuzzing on stable: runs the property tests of tests/reliability/properties.rs (config parser,
# schedule parser, crontab importer, API response parsing) round after round with fresh seeds
# for FUZZ_SECONDS (default 300), each round at RELIABILITY_SCALE times the CI iteration count
# (default 10). A failure prints the seed to replay:
#   RELIABILITY_SEED=<seed> cargo test --test tests reliability::properties
# cargo-fuzz targets need a nightly toolchain; when one is installed this says so, otherwise it
# reports that only the stable property tests ran.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-300}
export RELIABILITY_SCALE=${RELIABILITY_SCALE:-10}
if rustup toolchain list 2>/dev/null | grep -q nightly && cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: a nightly toolchain and cargo-fuzz are present, but no cargo-fuzz targets are kept yet; running the stable property tests"
else
  echo "fuzz: no nightly toolchain (or no cargo-fuzz): running the stable property tests only"
fi
cargo test --quiet --test tests --no-run
rounds=0; start=$SECONDS
while (( SECONDS - start < FUZZ_SECONDS )); do
  seed=$(( (RANDOM << 15 | RANDOM) ))
  echo "fuzz: round $((rounds + 1)) seed $seed scale $RELIABILITY_SCALE"
  if ! out=$(RELIABILITY_SEED=$seed cargo test --quiet --test tests reliability::properties -- --nocapture 2>&1); then
    echo "$out" | grep -E "panicked|FAILED|input" >&2 || true
    echo "fuzz: FAILED with seed $seed; replay: RELIABILITY_SEED=$seed RELIABILITY_SCALE=$RELIABILITY_SCALE cargo test --test tests reliability::properties" >&2
    exit 1
  fi
  echo "$out" | grep -E "accepted|refused|valid,|imported" | sed 's/^/  /'
  rounds=$((rounds + 1))
done
echo "fuzz: $rounds rounds in $((SECONDS - start)) s at scale $RELIABILITY_SCALE, nothing found"

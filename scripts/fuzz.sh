#!/usr/bin/env bash
# Fuzzing, in two parts:
# 1. cargo-fuzz (libFuzzer) targets in fuzz/ (config parser, schedule parser, crontab importer,
#    API response model types), each for TARGET_SECONDS (default 120), when a nightly toolchain
#    is installed; cargo-fuzz is installed when missing (`cargo install cargo-fuzz --locked`).
#    Each target starts from its seeds (fuzz/seeds/<target>, plus config/ and the broken-config
#    corpus for the config parser) and keeps what it learns in fuzz/corpus/<target> (not
#    committed). A crash is saved in fuzz/artifacts/<target>/ and stops the script; replay it
#    with `cargo +nightly fuzz run <target> <file>`.
# 2. The stable property tests of tests/reliability/properties.rs, round after round with fresh
#    seeds for FUZZ_SECONDS (default 300), each round at RELIABILITY_SCALE times the CI
#    iteration count (default 10). A failure prints the seed to replay:
#      RELIABILITY_SEED=<seed> cargo test --test tests reliability::properties
#
#   bash scripts/fuzz.sh                                   # both parts
#   TARGET_SECONDS=30 FUZZ_SECONDS=0 bash scripts/fuzz.sh  # a short cargo-fuzz pass only
#   FUZZ_TARGETS="schedule crontab" bash scripts/fuzz.sh   # some targets
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-300}
TARGET_SECONDS=${TARGET_SECONDS:-120}
FUZZ_TARGETS=${FUZZ_TARGETS:-config schedule crontab api_model}
export RELIABILITY_SCALE=${RELIABILITY_SCALE:-10}

# The seeds of a target: directories libFuzzer reads besides the target's own corpus.
seeds() {
  case $1 in
    config) echo "config tests/data/bad-configs" ;;
    *) echo "fuzz/seeds/$1" ;;
  esac
}

cargo_fuzz() {
  if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
  fi
  cargo +nightly fuzz build
  for target in $FUZZ_TARGETS; do
    mkdir -p "fuzz/corpus/$target"
    local dirs=() log="fuzz/corpus/$target.log"
    for d in $(seeds "$target"); do [[ -d $d ]] && dirs+=("$d"); done
    echo "fuzz: cargo-fuzz $target for ${TARGET_SECONDS} s"
    if ! cargo +nightly fuzz run "$target" "fuzz/corpus/$target" "${dirs[@]}" -- \
      -max_total_time="$TARGET_SECONDS" -print_final_stats=1 >"$log" 2>&1; then
      tail -40 "$log" >&2
      echo "fuzz: cargo-fuzz $target FAILED; the input is in fuzz/artifacts/$target/ (log: $log)" >&2
      exit 1
    fi
    # libFuzzer's summary: runs, time, coverage and corpus size.
    local runs cov corp
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1)
    echo "  $target: ${runs:-?}, $cov, $corp, nothing found"
  done
}

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  cargo_fuzz
else
  echo "fuzz: no nightly toolchain: skipping the cargo-fuzz targets (rustup toolchain install nightly)"
fi

(( FUZZ_SECONDS > 0 )) || exit 0
echo "fuzz: stable property tests for ${FUZZ_SECONDS} s"
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

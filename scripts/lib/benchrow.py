"""One row of the benchmark table (scripts/bench.sh, BENCHMARKS.md).

A benchmark script calls `emit` once per figure it measures. The row is printed as a line
starting with `ROW ` (so a reader of the script's own output sees it), and, when the
environment names a file in BENCH_ROWS, appended to it as one JSON object per line, which
scripts/bench.sh collects over its rounds into the table.

A row is: a stable key (`daemon.burst.p99`), what was measured in words, its value and unit,
the anchor measured in the same run (the C floor, curl, Debian cron, the ideal time; or none
for an absolute target), and the target: `ratio<=X` (value / anchor at most X), `<=X` (the
value itself, in its unit, at most X), or None (a figure tracked without a target).
"""

import json
import os

__all__ = ["emit"]


def emit(key, what, value, unit, target, anchor=None, anchor_what=None):
    """Prints the row and records it in $BENCH_ROWS (when set); returns whether it holds."""
    ratio = value / anchor if anchor else None
    if target is None:  # tracked, no target
        held = True
    elif target.startswith("ratio<="):
        limit = float(target[len("ratio<="):])
        held = ratio is not None and ratio <= limit
    elif target.startswith("<="):
        limit = float(target[2:])
        held = value <= limit
    else:
        raise ValueError(f"benchrow: target {target!r} is neither 'ratio<=X' nor '<=X'")
    row = {
        "key": key,
        "what": what,
        "value": value,
        "unit": unit,
        "anchor": anchor,
        "anchor_what": anchor_what,
        "ratio": ratio,
        "target": target,
        "held": held,
    }
    anchor_text = f"; anchor {anchor:.4g} {unit} ({anchor_what}); ratio {ratio:.3f}" if anchor else ""
    print(f"ROW {key}: {value:.4g} {unit}{anchor_text}; target {target or 'none'}: "
          f"{'held' if held else 'MISSED'}", flush=True)
    path = os.environ.get("BENCH_ROWS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
    return held

#!/usr/bin/env python3
"""bench/quotas.sh's results (one JSON per run in DIR) as the table of
docs/benchmarks/quotas.md."""
import json
import os
import sys

RUNS = [("lease", "leases through Redis"), ("local", "Redis killed: failMode local"),
        ("alone", "each replica alone (no Redis)"), ("lease2x", "leases, hot at 4x")]


def main(d):
    print("| run | hot's tokens served per minute (limit 100k) | worst trailing minute | "
          "over the limit | hot's requests that waited for a lease | cool's 429s | "
          "Redis commands/s |")
    print("|---|---|---|---|---|---|---|")
    for name, what in RUNS:
        path = os.path.join(d, name + ".json")
        if not os.path.exists(path):
            continue
        r = json.load(open(path))
        minutes = ", ".join("%.1fk" % (m / 1000) for m in r["minutes"]) or "-"
        over = max(0, r["worst_trailing_minute"] - r["limit"]) / r["limit"]
        waits = r["lease_waits"] / r["hot_requests"] if r["hot_requests"] else 0
        cps = "-" if r["redis_commands_per_s"] is None else "%.0f" % r["redis_commands_per_s"]
        print("| %s (%s) | %s | %.1fk | %.1f%% | %d of %d (%.2f%%) | %d of %d | %s |" % (
            name, what, minutes, r["worst_trailing_minute"] / 1000, 100 * over, r["lease_waits"],
            r["hot_requests"], 100 * waits, r["cool_429"], r["cool_requests"], cps))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/quotas")

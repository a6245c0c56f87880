#!/usr/bin/env python3
"""What is behind the interactive TTFT tail of a bench/priority_flood.sh run.

    python3 bench/priority_flood_tail.py RESULTS_DIR VARIANT K

RESULTS_DIR holds the run's files (bench/results/priority-flood), VARIANT is
the variant's index in the script, K the engines the interactive tenant has
free of the flood (its reserveEndpoints; 3, the pool, for the solo run).

An interactive request that arrives while every engine it may use already
runs another interactive request waits for that engine's step in progress;
one that finds such an engine idle does not. This counts, from the
per-request lines (sluice-load --requests), the arrivals that found at
least K interactive requests in flight, against what M/G/inf predicts: the
requests in flight a Poisson arrival sees are Poisson(L), L = arrival rate
x mean e2e latency (Little). It then lists the flooded requests slower than
the solo p99 that did not find K in flight: the tail the model leaves
unexplained.
"""
import json
import math
import sys

POOL = 3  # bench/priority_flood.sh's endpoints: all of them are free when solo


def interactive(path):
    with open(path) as f:
        recs = [json.loads(line) for line in f]
    it = [r for r in recs
          if r["flow"] == "interactive" and r["status"] == 200 and r["firstToken"] >= 0]
    it.sort(key=lambda r: r["sent"])
    return it


def in_flight_at_arrival(it):
    return [sum(1 for o in it if o is not r and o["sent"] <= r["sent"] < o["done"]) for r in it]


def poisson_tail(L, k):
    return 1 - sum(math.exp(-L) * L**j / math.factorial(j) for j in range(k))


def summarize(name, it, k):
    span = it[-1]["sent"] - it[0]["sent"]
    L = (len(it) - 1) / span * sum(r["done"] - r["sent"] for r in it) / len(it)
    n = in_flight_at_arrival(it)
    busy = sum(1 for x in n if x >= k)
    print("%s: L = %.2f; found >= %d in flight: %d of %d (%.1f%%), Poisson(L) predicts %.1f%%" %
          (name, L, k, busy, len(it), 100 * busy / len(it), 100 * poisson_tail(L, k)))
    return n


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    out, v, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    solo = interactive(f"{out}/{v}-solo.requests.jsonl")
    summarize("solo", solo, POOL)
    flooded = interactive(f"{out}/{v}-flooded.requests.jsonl")
    n = summarize("flooded", flooded, k)
    with open(f"{out}/{v}-solo.json") as f:
        p99 = next(x for x in json.load(f)["flows"] if x["name"] == "interactive")
    p99 = p99["ttftSeconds"]["p99"] * 1000
    slow = [((r["firstToken"] - r["sent"]) * 1000, x >= k, r.get("endpoint", ""))
            for r, x in zip(flooded, n) if (r["firstToken"] - r["sent"]) * 1000 > p99]
    print("flooded slower than the solo p99 (%.0f ms): %d, of which found >= %d in flight: %d" %
          (p99, len(slow), k, sum(1 for _, b, _ in slow if b)))
    for t, b, ep in sorted(slow, reverse=True):
        if not b:
            print("  not explained: %.0f ms on %s" % (t, ep))


if __name__ == "__main__":
    main()

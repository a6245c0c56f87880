#!/usr/bin/env python3
"""The per-decision cost table of issue 40's plugins, from scheduling_bench's
BM_Plugin cases (Google Benchmark JSON, --benchmark_repetitions=N).

    taskset -c 1 build/release/scheduling_bench --benchmark_filter=BM_Plugin \
      --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
      --benchmark_min_time=0.3 --benchmark_out=plugins.json --benchmark_out_format=json
    python3 bench/plugin_cost_table.py plugins.json

Each figure is the median over the repetitions. A plugin's cost is the ns per
cycle spent in its own calls (the scheduler's per-plugin timing, plugin_ns);
today's scorers' are those of the default profile's case in the same run.
The prefix match the prefix plugins share is timed apart (match_ns, before
each cycle), so no plugin's figure carries it, whichever asks first.
Ratios: to queue-scorer (the dearest of today's three scorers), and, for the
plugins that read endpoint labels, to today's label filter (prefill-filter)
of the same run. Whole profiles: the cycle's p50 against the default
profile's.
"""
import collections
import json
import statistics
import sys


def main(path):
    runs = collections.defaultdict(list)
    benchmarks = [b for b in json.load(open(path))["benchmarks"]
                  if b.get("run_type") == "iteration" and b["name"].startswith("BM_Plugin/")]
    for b in sorted(benchmarks, key=lambda b: int(b["name"].split("/")[1])):
        runs[b["label"]].append(b)
    if not runs:
        sys.exit(f"plugin_cost_table: no BM_Plugin runs in {path}")
    med = {label: {k: statistics.median(r[k] for r in rs if k in r)
                   for k in rs[0] if k.endswith("_ns")} for label, rs in runs.items()}
    today = med["today's scorers (the default profile)"]
    queue, kv, prefix = today["queue_ns"], today["kv_ns"], today["prefix_ns"]
    label_peer = med["prefill-filter"]["plugin_ns"]
    lines = ["| plugin (512 endpoints) | ns per decision | ÷ queue-scorer | ÷ prefill-filter |",
             "|---|---:|---:|---:|",
             f"| queue-scorer (today) | {queue:.0f} | 1.00 | |",
             f"| kv-cache-utilization-scorer (today) | {kv:.0f} | {kv / queue:.2f} | |",
             f"| prefix-cache-scorer (today) | {prefix:.0f} | {prefix / queue:.2f} | |",
             f"| prefill-filter (today, reads a label) | {label_peer:.0f} | {label_peer / queue:.2f} | 1.00 |"]
    if "match_ns" in today:
        match = today["match_ns"]
        lines.append(f"| the prefix match (shared, timed apart) | {match:.0f} | {match / queue:.2f} | |")
    reads_labels = ("context-length-aware", "topology-affinity")
    for label, m in med.items():
        if "plugin_ns" not in m or label == "prefill-filter":
            continue
        ns = m["plugin_ns"]
        peer = f"{ns / label_peer:.2f}" if label.startswith(reads_labels) else ""
        lines.append(f"| {label} | {ns:.0f} | {ns / queue:.2f} | {peer} |")
    default = med["default profile (no schedulingProfiles)"]["p50_ns"]
    lines += ["", "| whole profile, one cycle (512 endpoints) | p50 ns | ÷ default profile |",
              "|---|---:|---:|"]
    for label in ("default profile (no schedulingProfiles)",
                  "llm-d optimized-baseline guide profile", "llm-d optimized-baseline perf profile"):
        lines.append(f"| {label} | {med[label]['p50_ns']:.0f} | {med[label]['p50_ns'] / default:.2f} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "plugins.json")

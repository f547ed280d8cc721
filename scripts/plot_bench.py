#!/usr/bin/env python3
"""Plots the JSON report of `conveyor bench suite` (schema conveyor-bench/1) as SVG files.

Usage: scripts/plot_bench.py BENCH.json OUTDIR

Writes into OUTDIR (created if missing), each only when the report holds its data:
  launch_chain.svg, launch_fork_join.svg  launch cost per kernel vs N for sync, stream and graph: wall time per
                                          kernel and host time per launch call, median with min-max bars
  replay_ratio.svg                        Conveyor / raw CUDA graph replay (wall and host), chain and fork/join
  paired_ratio.svg                        paired runs, Conveyor / raw per pair: replay (wall) and build + instantiate
                                          (capture, explicit), median with min-max bars, aims 1.02 and 1.10 marked
  build.svg                               capture or explicit building + instantiate, microseconds per node
  first_launch.svg                        first launch with and without upload, and a later launch
  update.svg                              update costs for 1 node, 10% and all nodes changed
  memory.svg                              device memory held per node by an instantiated graph
Needs Matplotlib (Debian: python3-matplotlib).
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TOPOLOGY_NAMES = {"chain": "chain", "fork_join": "fork/join (width 4)"}


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        sys.exit(f"{path}: cannot read: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"{path}: not JSON: {e}")
    if not isinstance(report, dict) or report.get("schema") != "conveyor-bench/1":
        schema = report.get("schema") if isinstance(report, dict) else None
        sys.exit(f"{path}: not a conveyor-bench/1 report (schema {schema!r})")
    if not isinstance(report.get("results"), list):
        sys.exit(f"{path}: no results array")
    return report


def ok(results):
    return [r for r in results if r.get("error") is None]


def series(results, metric, **match):
    """Sorted (N, median, min, max) of `metric` over the results whose fields equal `match`."""
    points = []
    for r in results:
        if all(r.get(k) == v for k, v in match.items()) and metric in r["metrics"]:
            m = r["metrics"][metric]
            points.append((r["nodes"], m["median"], m["min"], m["max"]))
    return sorted(points)


def plot_series(ax, points, label, **style):
    if not points:
        return False
    n = [p[0] for p in points]
    med = [p[1] for p in points]
    lower = [p[1] - p[2] for p in points]
    upper = [p[3] - p[1] for p in points]
    ax.errorbar(n, med, yerr=[lower, upper], label=label, capsize=3, marker="o", markersize=4, **style)
    return True


def finish(ax, title, ylabel, logy=True):
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("N (kernels per step / nodes per graph)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")


def subtitle(report):
    env = report["environment"]
    s = report["settings"]
    return (f"{env['gpu']['name']}, driver CUDA {env['driver']['cuda_version']}, runtime "
            f"{env['runtime']['cuda_version']}; median and min–max of {s['repetitions']} repetitions")


def save(fig, report, outdir, name):
    fig.suptitle(subtitle(report), fontsize="small")
    fig.tight_layout()
    path = os.path.join(outdir, name)
    fig.savefig(path, format="svg")
    plt.close(fig)
    print(f"wrote {path}")


def plot_launch(report, results, outdir):
    for topology, title in TOPOLOGY_NAMES.items():
        fig, (wall, host) = plt.subplots(1, 2, figsize=(12, 4.8))
        drawn = False
        for variant, api, label, style in (("sync", "cuda", "sync", {}), ("stream", "cuda", "stream", {}),
                                           ("graph", "conveyor", "graph (Conveyor)", {}),
                                           ("graph", "raw", "graph (raw CUDA)", {"linestyle": "--"})):
            match = dict(group="launch", topology=topology, variant=variant, api=api)
            drawn |= plot_series(wall, series(results, "wall_us_per_kernel", **match), label, **style)
            plot_series(host, series(results, "host_us_per_call", **match), label, **style)
        if not drawn:
            plt.close(fig)
            continue
        finish(wall, f"{title}: wall time per kernel", "µs per kernel")
        finish(host, f"{title}: host time per launch call", "µs per call")
        save(fig, report, outdir, f"launch_{topology}.svg")


def ratio_points(results, metric, topology):
    conveyor = {p[0]: p[1] for p in series(results, metric, group="launch", topology=topology, variant="graph",
                                           api="conveyor")}
    raw = {p[0]: p[1] for p in series(results, metric, group="launch", topology=topology, variant="graph",
                                      api="raw")}
    return sorted((n, conveyor[n] / raw[n]) for n in conveyor if n in raw and raw[n] > 0)


def plot_ratio(report, results, outdir):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for topology, title in TOPOLOGY_NAMES.items():
        for metric, label, style in (("wall_us_per_kernel", "wall", "-"), ("host_us_per_call", "host", "--")):
            points = ratio_points(results, metric, topology)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", markersize=4,
                        label=f"{title}, {label}")
                drawn = True
    if not drawn:
        plt.close(fig)
        return
    ax.axhline(1.0, color="black", linewidth=0.8)
    finish(ax, "Graph replay: Conveyor ÷ raw CUDA (medians)", "ratio", logy=False)
    save(fig, report, outdir, "replay_ratio.svg")


def plot_paired(report, results, outdir):
    fig, (replay, build) = plt.subplots(1, 2, figsize=(12, 4.8))
    drawn = False
    for topology, title in TOPOLOGY_NAMES.items():
        style = {} if topology == "chain" else {"linestyle": "--"}
        drawn |= plot_series(replay, series(results, "wall_ratio", group="paired", topology=topology,
                                            variant="replay"), title, **style)
        for variant in ("capture", "explicit"):
            drawn |= plot_series(build, series(results, "ratio", group="paired", topology=topology, variant=variant),
                                 f"{title}, {variant}", **style)
    if not drawn:
        plt.close(fig)
        return
    for ax, aim in ((replay, 1.02), (build, 1.10)):
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(aim, color="red", linewidth=0.8, linestyle=":", label=f"aim ≤ {aim:.2f}")
    finish(replay, "Replay, paired: Conveyor ÷ raw (wall)", "ratio", logy=False)
    finish(build, "Build + instantiate, paired: Conveyor ÷ raw", "ratio", logy=False)
    save(fig, report, outdir, "paired_ratio.svg")


def plot_build(report, results, outdir):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    drawn = False
    for ax, (topology, title) in zip(axes, TOPOLOGY_NAMES.items()):
        for colour, variant in enumerate(("capture", "explicit")):
            for api, style in (("conveyor", {}), ("raw", {"linestyle": "--"})):
                drawn |= plot_series(ax, series(results, "us_per_node", group="build", topology=topology,
                                                variant=variant, api=api), f"{variant}, {api}",
                                     color=f"C{colour}", **style)
        finish(ax, f"{title}: build + instantiate", "µs per node")
    if not drawn:
        plt.close(fig)
        return
    save(fig, report, outdir, "build.svg")


def plot_first_launch(report, results, outdir):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    drawn = False
    for ax, (topology, title) in zip(axes, TOPOLOGY_NAMES.items()):
        for metric, variant, label in (("first_launch_wall_us", "no_upload", "first launch, no upload"),
                                       ("upload_us", "upload", "upload"),
                                       ("first_launch_wall_us", "upload", "first launch after upload"),
                                       ("later_launch_wall_us", "no_upload", "later launch")):
            drawn |= plot_series(ax, series(results, metric, group="first_launch", topology=topology,
                                            variant=variant), label)
        finish(ax, f"{title}: first launch", "µs (wall)")
    if not drawn:
        plt.close(fig)
        return
    save(fig, report, outdir, "first_launch.svg")


def changed_classes(r):
    """Which of '1 node', '10%', 'all' an update result belongs to (N = 1 or 10 fall in several)."""
    n, k = r["nodes"], r["changed"]
    classes = set()
    if k == 1:
        classes.add("1 node")
    if k == max(1, n // 10):
        classes.add("10%")
    if k == n:
        classes.add("all")
    return classes


def plot_update(report, results, outdir):
    updates = [r for r in results if r["group"] == "update"]
    if not updates:
        return
    fractions = ("1 node", "10%", "all")
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), sharey=True)
    for ax, fraction in zip(axes, fractions):
        chosen = [r for r in updates if fraction in changed_classes(r)]
        for colour, (variant, label) in enumerate((("setters", "per-node setters"), ("whole", "whole-graph update"),
                                                   ("reinstantiate", "re-instantiate"))):
            for api, style in (("conveyor", {}), ("raw", {"linestyle": "--"})):
                plot_series(ax, series(chosen, "update_us", variant=variant, api=api), f"{label}, {api}",
                            color=f"C{colour}", **style)
        finish(ax, f"update: {fraction} changed", "µs per update")
    save(fig, report, outdir, "update.svg")


def plot_memory(report, results, outdir):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for topology, title in TOPOLOGY_NAMES.items():
        drawn |= plot_series(ax, series(results, "bytes_per_node", group="memory", topology=topology), title)
    if not drawn:
        plt.close(fig)
        return
    finish(ax, "Device memory held by an instantiated graph", "bytes per node", logy=False)
    save(fig, report, outdir, "memory.svg")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", help="JSON written by `conveyor bench suite --json`")
    parser.add_argument("outdir", help="folder for the SVG files")
    args = parser.parse_args()
    report = load(args.report)
    os.makedirs(args.outdir, exist_ok=True)
    results = ok(report["results"])
    if not results:
        sys.exit(f"{args.report}: no benchmark ran without error: nothing to plot")
    plot_launch(report, results, args.outdir)
    plot_ratio(report, results, args.outdir)
    plot_paired(report, results, args.outdir)
    plot_build(report, results, args.outdir)
    plot_first_launch(report, results, args.outdir)
    plot_update(report, results, args.outdir)
    plot_memory(report, results, args.outdir)
    failed = [r["name"] for r in report["results"] if r.get("error") is not None]
    if failed:
        print(f"{len(failed)} failed benchmarks left out: {', '.join(failed[:5])}{' ...' if len(failed) > 5 else ''}")


if __name__ == "__main__":
    main()

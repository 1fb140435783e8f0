#!/usr/bin/env python3
"""Side-by-side benchmark: every workload under every allocator
configuration in one run, interleaved (A B C ... A B C ...), several runs
each. Reports medians, min-max and ratios to glibc, peak memory (hugetlbfs
pages included) and huge-page figures; writes results/<stamp>/results.json
and results.md. The hugetlbfs pool is reserved only around the
configurations that use it, and every knob touched is put back.

usage: scripts/bench.py [--quick] [--runs N] [--only W2,W6] [--configs a,b]
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
LIB = "/usr/lib/x86_64-linux-gnu/"
POOL = "/proc/sys/vm/nr_hugepages"

# name -> (environment, hugetlbfs pages to reserve (MiB of the largest
# workload / 2 is decided per workload), description)
CONFIGS = {
    "glibc": ({}, False, "glibc malloc"),
    "glibc-hugetlb1": ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, False,
                       "glibc, THP via madvise"),
    "glibc-hugetlb2": ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2"}, True,
                       "glibc, hugetlbfs pool"),
    "jemalloc": ({"LD_PRELOAD": LIB + "libjemalloc.so.2"}, False,
                 "jemalloc 5.3"),
    "jemalloc-thp": ({"LD_PRELOAD": LIB + "libjemalloc.so.2",
                      "MALLOC_CONF": "thp:always"}, False,
                     "jemalloc, thp:always"),
    "mimalloc": ({"LD_PRELOAD": LIB + "libmimalloc.so.2"}, False,
                 "mimalloc 2.0"),
    "mimalloc-large": ({"LD_PRELOAD": LIB + "libmimalloc.so.2",
                        "MIMALLOC_LARGE_OS_PAGES": "1"}, False,
                       "mimalloc, large OS pages"),
    "tcmalloc": ({"LD_PRELOAD": LIB + "libtcmalloc_minimal.so.4"}, False,
                 "gperftools tcmalloc"),
    "hugepreload": ({"LD_PRELOAD": os.path.join(BUILD, "libhugepreload.so")},
                    False, "hugepreload default (lifetime:learn)"),
    "hugepreload-off": ({"LD_PRELOAD": os.path.join(BUILD,
                                                    "libhugepreload.so"),
                         "HUGEPRELOAD_CONF": "lifetime:off"},
                        False, "hugepreload, lifetime:off (size alone)"),
    "hugepreload-hugetlb": ({"LD_PRELOAD": os.path.join(BUILD,
                                                        "libhugepreload.so")},
                            True, "hugepreload with a hugetlbfs pool"),
    # Lifetime learning; the learn run records the profile that the replay
    # run after it in the same round loads ({prof}: one per workload).
    "hugepreload-learn": ({"LD_PRELOAD": os.path.join(BUILD,
                                                      "libhugepreload.so"),
                           "HUGEPRELOAD_CONF": "lifetime:learn,"
                                               "lifetime_record:{prof}"},
                          False, "hugepreload, lifetime:learn"),
    "hugepreload-replay": ({"LD_PRELOAD": os.path.join(BUILD,
                                                       "libhugepreload.so"),
                            "HUGEPRELOAD_CONF": "lifetime:replay,"
                                                "lifetime_profile:{prof}"},
                           False, "hugepreload, lifetime:replay of the "
                                  "learn run's profile"),
}

# Configurations run only when asked for (--configs): not in the default
# set until their issue's targets are measured.
OPTIONAL = {"hugepreload-off", "hugepreload-learn", "hugepreload-replay"}
OUTDIR = None

# Workloads whose figure is memory, not time: the configurations of a run
# go at once (their 15 s waits overlap), as many as fit in MemAvailable;
# the others run one at a time. name -> peak MiB of one run (full, quick).
CONCURRENT = {"W4": (3200, 800), "W4r": (3200, 800)}

# Exact figures (callgrind): one run each.
EXACT = {"W5cg"}

# The set-up figure shown beside the main one (first-touch faults are slow
# on this VM, so W1-W3 report the hot phase as the main figure).
SETUP = {"W1": "reserve_s", "W1l": "insert_s", "W2": "setup_s",
         "W3": "setup_s"}

# name -> (argv, main figure, unit, pool MiB, quick argv)
WORKLOADS = {
    "W1": (["hashmap", "10", "0"], "ns_per_insert", "ns/insert", 600,
           ["hashmap", "10", "0"]),
    "W1l": (["hashmap", "10", "50"], "ns_per_lookup", "ns/lookup", 600,
            ["hashmap", "10", "20"]),
    "W2": (["chase", "4096", "20", "0"], "ns_per_load", "ns/load", 4200,
           ["chase", "1024", "10", "0"]),
    "W3": (["workloads", "objchase", "4000000", "2", "20"], "ns_per_load",
           "ns/load", 8400, ["workloads", "objchase", "500000", "2", "10"]),
    "W4": (["workloads", "stranding", "2048", "0", "15"], "excess_kb",
           "kB over live after 15 s", 0,
           ["workloads", "stranding", "512", "0", "15"]),
    "W4r": (["workloads", "stranding", "2048", "1", "15"], "excess_kb",
            "kB over live after 15 s", 0,
            ["workloads", "stranding", "512", "1", "15"]),
    "W5": (["workloads", "churn", "2", "20000000"], "time_s", "s", 0,
           ["workloads", "churn", "2", "5000000"]),
    # Instructions, not time: callgrind at two loop lengths, difference
    # divided by the extra operations (start-up cancels out).
    "W5cg": (["workloads", "churn", "1"], "instr_per_op",
             "instructions/op (callgrind, 1 thread)", 0,
             ["workloads", "churn", "1"]),
    "W6": (["workloads", "reuse", "2000", "5", "25", "20"], "time_s", "s",
           600, ["workloads", "reuse", "400", "5", "25", "20"]),
}


def knob(path, value=None):
    with open(path) as f:
        old = f.read().strip()
    if value is not None:
        with open(path, "w") as f:
            f.write(str(value))
    return old


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def callgrind(argv, env, ops):
    out = subprocess.run(["valgrind", "--tool=callgrind",
                          "--callgrind-out-file=/dev/null"] + argv +
                         [str(ops)], env=env, capture_output=True, text=True,
                         timeout=600)
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[1])
    raise RuntimeError(out.stderr[-300:])


def run_one(config, workload, quick):
    env_add, pool, _ = CONFIGS[config]
    argv, main, _, pool_mib, qargv = WORKLOADS[workload]
    argv = list(qargv if quick else argv)
    argv[0] = os.path.join(BUILD, argv[0])
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "MALLOC_CONF", "GLIBC_TUNABLES",
                        "HUGEPRELOAD_CONF", "MIMALLOC_LARGE_OS_PAGES")}
    env.update({k: v.replace("{prof}", os.path.join(OUTDIR, workload +
                                                     ".prof"))
                for k, v in env_add.items()})
    if workload == "W5cg":
        try:
            a, b = callgrind(argv, env, 100000), callgrind(argv, env, 300000)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            return {"error": str(e)}
        return {"instr_per_op": (b - a) / 200000,
                "main": (b - a) / 200000}
    old_pool = None
    if pool and pool_mib:
        old_pool = knob(POOL, pool_mib // 2)
    try:
        t0 = time.monotonic()
        out = subprocess.run(argv, env=env, capture_output=True, text=True,
                             timeout=600)
        wall = time.monotonic() - t0
    finally:
        if old_pool is not None:
            knob(POOL, old_pool)
    if out.returncode != 0:
        return {"error": f"exit {out.returncode}: {out.stderr[-300:]}"}
    res = {}
    for line in out.stdout.splitlines():
        k, _, v = line.partition("=")
        try:
            res[k] = float(v)
        except ValueError:
            pass
    res["wall_s"] = wall
    res["main"] = res.get(main)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--only")
    ap.add_argument("--configs")
    a = ap.parse_args()
    runs = a.runs or (1 if a.quick else 3)
    workloads = a.only.split(",") if a.only else list(WORKLOADS)
    configs = (a.configs.split(",") if a.configs else
               [c for c in CONFIGS if c not in OPTIONAL])
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(ROOT, "results", stamp)
    os.makedirs(outdir, exist_ok=True)
    global OUTDIR
    OUTDIR = outdir
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    saved = {POOL: knob(POOL), thp: knob(thp)}
    results = {w: {c: [] for c in configs} for w in workloads}
    total = sum(1 if w in EXACT else runs for w in workloads) * len(configs)
    done = 0
    try:
        for w in workloads:
            # Instruction counts are exact: one run is the median.
            for r in range(1 if w in EXACT else runs):
                def record(c, res):
                    nonlocal done
                    results[w][c].append(res)
                    done += 1
                    fig = res.get("main")
                    print(f"[{done}/{total}] {w} run {r + 1} {c:20} "
                          f"{res.get('error') or f'{fig:.2f}'}", flush=True)
                if w in CONCURRENT:
                    need = CONCURRENT[w][1 if a.quick else 0]
                    fit = int(0.8 * meminfo("MemAvailable:") / 1024 // need)
                    # A replay waits for the profile its learn run writes.
                    later = [c for c in configs if "lifetime_profile" in
                             CONFIGS[c][0].get("HUGEPRELOAD_CONF", "")]
                    for batch in ([c for c in configs if c not in later],
                                  later):
                        if not batch:
                            continue
                        with concurrent.futures.ThreadPoolExecutor(
                                max(1, min(len(batch), fit))) as ex:
                            for c, res in zip(batch, ex.map(
                                    lambda c: run_one(c, w, a.quick), batch)):
                                record(c, res)
                else:                        # interleaved, one at a time
                    for c in configs:
                        record(c, run_one(c, w, a.quick))
    finally:
        for path, value in saved.items():
            if knob(path) != value:
                knob(path, value.split("[")[-1].split("]")[0]
                     if "[" in value else value)
    report(results, outdir, runs, a.quick)


def summary(results):
    rows = {}
    for w, per in results.items():
        rows[w] = {}
        for c, rs in per.items():
            vals = [r["main"] for r in rs if r.get("main") is not None]
            peaks = [r["peak_kb"] for r in rs if "peak_kb" in r]
            huge = [r["huge_kb"] for r in rs if "huge_kb" in r]
            setup = [r[SETUP[w]] for r in rs if SETUP.get(w) in r]
            if not vals:
                rows[w][c] = {"error": rs[0].get("error") if rs else "none"}
                continue
            rows[w][c] = {"median": statistics.median(vals), "min": min(vals),
                          "max": max(vals), "runs": len(vals),
                          "peak_kb": statistics.median(peaks) if peaks else None,
                          "huge_kb": statistics.median(huge) if huge else None,
                          "setup_s": statistics.median(setup) if setup else None}
        base = rows[w].get("glibc", {}).get("median")
        for c, row in rows[w].items():
            if "median" in row and base:
                row["ratio_to_glibc"] = row["median"] / base
    return rows


def report(results, outdir, runs, quick):
    rows = summary(results)
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": f"{platform.node()} {platform.machine()} "
                       f"{os.cpu_count()} cores, kernel {platform.release()}",
            "runs": runs, "quick": quick, "commit": subprocess.run(
                ["git", "-C", ROOT, "describe", "--always", "--dirty"],
                capture_output=True, text=True).stdout.strip()}
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"meta": meta, "summary": rows, "raw": results}, f,
                  indent=1)
    lines = [f"# hugepreload benchmark, {meta['date']}", "",
             f"{meta['machine']}; commit {meta['commit']}; {runs} run(s) "
             "per cell (W5cg: 1, exact), interleaved"
             f"{' (quick)' if quick else ''}. Medians (min-max); ratio to "
             "glibc; lower is better. Peak: most memory held (RSS plus "
             "hugetlbfs pages); huge: of it, on huge pages (AnonHugePages plus "
             "hugetlbfs) at that moment; set-up: median seconds of the "
             "allocation phase, before the timed one.", ""]
    for w, per in rows.items():
        unit = WORKLOADS[w][2]
        lines += [f"## {w}: {unit}", "",
                  "| configuration | median | min-max | ratio | peak MiB | "
                  "huge MiB | set-up s |",
                  "|---|---|---|---|---|---|---|"]
        for c, row in per.items():
            if "error" in row:
                lines.append(f"| {c} | error: {row['error']} | | | | | |")
                continue
            mib = lambda kb: "" if kb is None else f"{kb / 1024:.0f}"
            sec = "" if row["setup_s"] is None else f"{row['setup_s']:.2f}"
            ratio = row.get("ratio_to_glibc")
            lines.append(f"| {c} | {row['median']:.2f} | {row['min']:.2f}-"
                         f"{row['max']:.2f} | "
                         f"{'' if ratio is None else f'{ratio:.2f}'} | "
                         f"{mib(row['peak_kb'])} | {mib(row['huge_kb'])} | "
                         f"{sec} |")
        lines.append("")
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    chart(rows, outdir, meta)
    print(f"written: {outdir}/results.json, results.md, results.png")


def chart(rows, outdir, meta):
    """Ratio to glibc, per workload (clusters) and configuration (bars)."""
    workloads = list(rows)
    if not any("ratio_to_glibc" in r for w in rows.values() for r in w.values()):
        print("no chart: glibc was not in the run (the chart shows ratios "
              "to glibc)")
        return
    configs = [c for c in CONFIGS if any(c in rows[w] for w in workloads)]
    data = os.path.join(outdir, "ratios.dat")
    with open(data, "w") as f:
        f.write("config " + " ".join(workloads) + "\n")
        for c in configs:
            vals = [rows[w].get(c, {}).get("ratio_to_glibc") for w in workloads]
            f.write(c + " " + " ".join(f"{v:.4f}" if v else "NaN"
                                       for v in vals) + "\n")
    plot = f"""set terminal pngcairo size 1400,700 font ',10'
set output '{outdir}/results.png'
set title 'hugepreload benchmark {meta["date"]}: median ratio to glibc (lower is better)'
set style data histograms
set style histogram clustered gap 2
set style fill solid 0.8 border -1
set boxwidth 0.9
set key outside right
set grid ytics
set yrange [0:*]
set xtics rotate by -30
plot for [i=2:{len(workloads) + 1}] '{data}' using i:xtic(1) title columnheader(i)
"""
    try:
        subprocess.run(["gnuplot"], input=plot, text=True, check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no chart: gnuplot failed ({e})")


if __name__ == "__main__":
    sys.exit(main())

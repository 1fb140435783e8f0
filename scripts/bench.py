#!/usr/bin/env python3
"""Side-by-side benchmark: every workload under every allocator
configuration in one run, interleaved (A B C ... C A B ..., each round in
an order of its own), at least 3
runs each (quick mode too). Reports medians, min-max and ratios to glibc,
peak memory (hugetlbfs pages included) and huge-page figures, and for
every timed workload a control beside them: glibc with every heap and
mapping hand-advised (MADV_HUGEPAGE, which glibc.malloc.hugetlb=1 does
for all of them), as much of the memory on huge pages as the host gives.
The control's gain over glibc is the host's limit; each result is also
shown as a share of it. The machine's load average is recorded before
and after. Quick mode runs smaller sizes and six configurations (glibc,
the control, jemalloc thp:always, mimalloc with large OS pages, tcmalloc,
hugepreload) in about five minutes. Writes results/<stamp>/results.json,
results.md and results.png. The hugetlbfs pool is reserved only around
the configurations that use it, and every knob touched is put back.

usage: scripts/bench.py [--quick] [--runs N] [--only W2,W6] [--configs a,b]
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
LIB = "/usr/lib/x86_64-linux-gnu/"
POOL = "/proc/sys/vm/nr_hugepages"
PY = "/usr/bin/python3"                  # Debian's, with numpy
STRIDE = os.path.join(ROOT, "bench", "stride.py")

# name -> (environment, hugetlbfs pages to reserve (MiB of the largest
# workload / 2 is decided per workload), description)
CONFIGS = {
    "glibc": ({}, False, "glibc malloc"),
    # The host's limit, hand-advised: glibc madvises every heap and
    # mapping it makes (MADV_HUGEPAGE) under glibc.malloc.hugetlb=1, so
    # all of the program's memory may be on huge pages. It is also the
    # peer "glibc with THP", so it has no second row.
    "control": ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, False,
                "control: glibc, every heap and mapping madvised "
                "(glibc.malloc.hugetlb=1)"),
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
                                               "long_lived:mimalloc,"
                                               "lifetime_record:{prof}"},
                          False, "hugepreload, lifetime:learn, "
                                 "long_lived:mimalloc"),
    # The other long_lived setting, beside it in the same run.
    "hugepreload-learn-je": ({"LD_PRELOAD": os.path.join(BUILD,
                                                         "libhugepreload.so"),
                              "HUGEPRELOAD_CONF": "lifetime:learn,"
                                                  "long_lived:jemalloc"},
                             False, "hugepreload, lifetime:learn, "
                                    "long_lived:jemalloc (the default)"),
    # The same two settings with the hugetlbfs pool glibc-hugetlb2 gets
    # (the pool is hugepreload's first choice): set-up beside that peer's
    # on the same footing, reserved pages that need no new host memory.
    "hugepreload-learn-pool": ({"LD_PRELOAD": os.path.join(BUILD,
                                                           "libhugepreload.so"),
                                "HUGEPRELOAD_CONF": "lifetime:learn,"
                                                    "long_lived:jemalloc"},
                               True, "hugepreload, lifetime:learn, "
                                     "long_lived:jemalloc, hugetlbfs pool"),
    "hugepreload-learn-mi-pool": ({"LD_PRELOAD": os.path.join(
                                       BUILD, "libhugepreload.so"),
                                   "HUGEPRELOAD_CONF": "lifetime:learn,"
                                                       "long_lived:mimalloc"},
                                  True, "hugepreload, lifetime:learn, "
                                        "long_lived:mimalloc, hugetlbfs pool"),
    "hugepreload-replay": ({"LD_PRELOAD": os.path.join(BUILD,
                                                       "libhugepreload.so"),
                            "HUGEPRELOAD_CONF": "lifetime:replay,"
                                                "lifetime_profile:{prof}"},
                           False, "hugepreload, lifetime:replay of the "
                                  "learn run's profile"),
}

# Configurations run only when asked for (--configs): not in the default
# set until their issue's targets are measured.
OPTIONAL = {"hugepreload-off", "hugepreload-learn", "hugepreload-learn-je",
            "hugepreload-learn-pool", "hugepreload-learn-mi-pool",
            "hugepreload-replay"}
OUTDIR = None
THP = "/sys/kernel/mm/transparent_hugepage/enabled"
QUICK_CONFIGS = ["glibc", "control", "jemalloc-thp", "mimalloc-large",
                 "tcmalloc", "hugepreload"]

# Workloads whose figure is memory, not time: the configurations of a run
# go at once (their 15 s waits overlap), as many as fit in MemAvailable;
# the others run one at a time. name -> peak MiB of one run (full, quick).
CONCURRENT = {"W4": (3200, 800), "W4r": (3200, 800)}

# Exact figures (callgrind): one run each.
EXACT = {"W5cg", "W9cg"}
# Workloads whose figure is not a time: no control (and no THP change
# while other configurations run beside each other).
UNTIMED = EXACT | set(CONCURRENT)

# The set-up figure shown beside the main one (first-touch faults are slow
# on this VM, so W1-W3 report the hot phase as the main figure).
SETUP = {"W1": "reserve_s", "W1l": "insert_s", "W2": "setup_s",
         "W3": "setup_s", "W7": "setup_s"}

# name -> (argv, main figure, unit, pool MiB, quick argv)
WORKLOADS = {
    "W1": (["hashmap", "10", "0"], "ns_per_insert", "ns/insert", 600,
           ["hashmap", "10", "0"]),
    "W1l": (["hashmap", "10", "50"], "ns_per_lookup", "ns/lookup", 600,
            ["hashmap", "10", "10"]),
    "W2": (["chase", "4096", "20", "0"], "ns_per_load", "ns/load", 4200,
           ["chase", "512", "5", "0"]),
    "W3": (["workloads", "objchase", "4000000", "2", "20"], "ns_per_load",
           "ns/load", 8400, ["workloads", "objchase", "250000", "2", "5"]),
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
    # A promoted site's own allocations (bench/mfloop "promoted"): what a
    # long-lived malloc(64) and its free cost. hugepreload's configurations
    # replay a profile recorded first with their own settings (a learning
    # run would see the loop's objects die and demote the site).
    "W9cg": (["mfloop", "64", "promoted"], "instr_per_op",
             "instructions per malloc(64)+free at a promoted site "
             "(callgrind)", 0, ["mfloop", "64", "promoted"]),
    "W6": (["workloads", "reuse", "2000", "5", "25", "20"], "time_s", "s",
           600, ["workloads", "reuse", "400", "5", "25", "20"]),
    # The program's own memory, never seen by malloc: W2's chase through
    # a 4 GiB anonymous mmap of its own (issue 15). Pool as W2's: the
    # pool configurations show that a pool does not reach it.
    "W7": (["chase", "4096", "20", "0", "mmap"], "ns_per_load", "ns/load",
           4200, ["chase", "512", "5", "0", "mmap"]),
    # The textbook chapter's stride demo (Debian's python3 and numpy, a
    # 1 GiB buffer from Python's mmap module, one byte read per 4 KiB
    # page, 100 passes), timed without perf.
    "W8": ([PY, STRIDE, "plain", "1024", "100"], "ns_per_access",
           "ns/access", 0, [PY, STRIDE, "plain", "256", "100"]),
    # Server shapes (bench/servers.cpp, issue 33): larson-style random
    # replacement with arrays handed between threads, its sized-delete
    # variant, producer/consumer frees on other threads, short-lived
    # threads, a growing heap with leaks, and a small single-thread loop
    # (a program of a few MB: its peak is the figure to watch).
    "W10": (["servers", "larson", "2", "3", "0"], "ns_per_op", "ns/op", 0,
            ["servers", "larson", "2", "1", "0"]),
    "W10s": (["servers", "larson", "2", "3", "1"], "ns_per_op", "ns/op", 0,
             ["servers", "larson", "2", "1", "1"]),
    "W11": (["servers", "prodcons", "1", "3"], "ns_per_op", "ns/message", 0,
            ["servers", "prodcons", "1", "1"]),
    "W12": (["servers", "threads", "10000"], "time_s", "s", 0,
            ["servers", "threads", "3000"]),
    "W13": (["servers", "leak", "4000000"], "time_s", "s", 0,
            ["servers", "leak", "1000000"]),
    "W14": (["servers", "small", "100000000"], "ns_per_op", "ns/op", 0,
            ["servers", "small", "20000000"]),
}

# The control of a workload whose memory no malloc setting reaches: the
# program advises it by hand (argv instead of the workload's own).
CONTROL_ARGV = {
    "W7": (["chase", "4096", "20", "0", "mmap-advised"],
           ["chase", "512", "5", "0", "mmap-advised"]),
    "W8": ([PY, STRIDE, "advised", "1024", "100"],
           [PY, STRIDE, "advised", "256", "100"]),
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


def promoted_pair(env):
    """W9cg: scripts/bench-callgrind's third column for this
    configuration's library and settings."""
    out = subprocess.run([os.path.join(ROOT, "scripts", "bench-callgrind"),
                          "--at-site", env.get("LD_PRELOAD", ""),
                          env.get("HUGEPRELOAD_CONF", "")],
                         env={k: v for k, v in env.items()
                              if k not in ("LD_PRELOAD", "HUGEPRELOAD_CONF")},
                         capture_output=True, text=True, timeout=1800)
    try:
        return float(out.stdout.strip())
    except ValueError:
        raise RuntimeError(" ".join(out.stderr[-300:].split()) or
                           f"exit {out.returncode}") from None


def run_one(config, workload, quick):
    env_add, pool, _ = CONFIGS[config]
    argv, main, _, pool_mib, qargv = WORKLOADS[workload]
    if config == "control" and workload in CONTROL_ARGV:
        argv, qargv = CONTROL_ARGV[workload]
    argv = list(qargv if quick else argv)
    if not os.path.isabs(argv[0]):
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
    if workload == "W9cg":
        try:
            v = promoted_pair(env)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            return {"error": str(e)}
        return {"instr_per_op": v, "main": v}
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
        return {"error": f"exit {out.returncode}: " +
                " ".join(out.stderr[-300:].split())}
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


def round_order(configs, r):
    """The configurations of round r, interleaved in an order of its own
    (seeded by r, so a run can be repeated): a fixed order gives each one
    the same predecessor every round, and on this VM a run right after one
    that freed gigabytes of 4 KiB pages faults its memory in several times
    slower (W3's set-up: 6.0-7.7 s after tcmalloc, 1.5-2.1 s after a run
    of its own). A replay stays after the learn run whose profile it
    loads."""
    order = list(configs)
    random.Random(r).shuffle(order)
    for c in [c for c in order if "lifetime_profile" in
              CONFIGS[c][0].get("HUGEPRELOAD_CONF", "")]:
        if "hugepreload-learn" in order and \
                order.index(c) < order.index("hugepreload-learn"):
            order.remove(c)
            order.insert(order.index("hugepreload-learn") + 1, c)
    return order


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--only")
    ap.add_argument("--configs")
    a = ap.parse_args()
    runs = max(a.runs or 3, 1)
    workloads = a.only.split(",") if a.only else list(WORKLOADS)
    configs = (a.configs.split(",") if a.configs else QUICK_CONFIGS
               if a.quick else [c for c in CONFIGS if c not in OPTIONAL])
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(ROOT, "results", stamp)
    os.makedirs(outdir, exist_ok=True)
    global OUTDIR
    OUTDIR = outdir
    saved = {POOL: knob(POOL), THP: knob(THP)}
    load0 = os.getloadavg()
    # The commit measured: read now, not after edits made during the run.
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always",
                             "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    t_start = time.monotonic()

    def configs_of(w):
        return [c for c in configs if c != "control" or w not in UNTIMED]
    results = {w: {c: [] for c in configs_of(w)} for w in workloads}
    total = sum((1 if w in EXACT else runs) * len(configs_of(w))
                for w in workloads)
    done = 0
    try:
        for w in workloads:
            def record(r, c, res):
                nonlocal done
                results[w][c].append(res)
                done += 1
                fig = res.get("main")
                print(f"[{done}/{total}] {w} run {r + 1} {c:20} "
                      f"{res.get('error') or f'{fig:.2f}'}", flush=True)
            if w in CONCURRENT:
                # Memory, not time: every run of every configuration at
                # once, as many as fit in MemAvailable (their 15 s waits
                # overlap). A replay waits for the profile its learn
                # runs write.
                need = CONCURRENT[w][1 if a.quick else 0]
                fit = int(0.8 * meminfo("MemAvailable:") / 1024 // need)
                later = [c for c in configs_of(w) if "lifetime_profile" in
                         CONFIGS[c][0].get("HUGEPRELOAD_CONF", "")]
                for group in ([c for c in configs_of(w) if c not in later],
                              later):
                    batch = [(r, c) for r in range(runs) for c in group]
                    if not batch:
                        continue
                    with concurrent.futures.ThreadPoolExecutor(
                            max(1, min(len(batch), fit))) as ex:
                        for (r, c), res in zip(batch, ex.map(
                                lambda rc: run_one(rc[1], w, a.quick),
                                batch)):
                            record(r, c, res)
                continue
            # Instruction counts are exact: one run is the median.
            for r in range(1 if w in EXACT else runs):
                for c in round_order(configs_of(w), r):  # one at a time
                    record(r, c, run_one(c, w, a.quick))
    finally:
        for path, value in saved.items():
            if knob(path) != value:
                knob(path, value.split("[")[-1].split("]")[0]
                     if "[" in value else value)
    load = {"before": load0, "after": os.getloadavg(),
            "minutes": (time.monotonic() - t_start) / 60, "commit": commit}
    report(results, outdir, runs, a.quick, load)


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
        base_peak = rows[w].get("glibc", {}).get("peak_kb")
        ctl = rows[w].get("control", {}).get("median")
        for c, row in rows[w].items():
            if "median" in row and base:
                row["ratio_to_glibc"] = row["median"] / base
            if row.get("peak_kb") and base_peak:
                row["peak_ratio"] = row["peak_kb"] / base_peak
            # The host's gain is glibc's time less the control's; a
            # result's share of it is how much of that it got. Below a
            # 3% gain the host gives nothing to share.
            if "median" in row and base and ctl and base - ctl > 0.03 * base:
                row["share_of_gain"] = (base - row["median"]) / (base - ctl)
    return rows


def fmt(unit, v):
    """kB without decimals; times and counts with two."""
    return f"{v:.0f}" if unit.startswith("kB") else f"{v:.2f}"


def report(results, outdir, runs, quick, load):
    rows = summary(results)
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": f"{platform.node()} {platform.machine()} "
                       f"{os.cpu_count()} cores, kernel {platform.release()}",
            "runs": runs, "quick": quick, "load": load,
            "commit": load.pop("commit")}
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"meta": meta, "summary": rows, "raw": results}, f,
                  indent=1)
    la = lambda t: " ".join(f"{x:.2f}" for x in t)
    exact = ", ".join(sorted(w for w in EXACT if w in rows))
    exact = f" ({exact}: 1, exact)" if exact else ""
    lines = [f"# hugepreload benchmark, {meta['date']}", "",
             f"{meta['machine']}; commit {meta['commit']}; {runs} run(s) "
             f"per cell{exact}, interleaved (each round in an order of "
             f"its own)"
             f"{' (quick)' if quick else ''}; {load['minutes']:.1f} minutes. "
             f"Load average (1, 5, 15 min) {la(load['before'])} before, "
             f"{la(load['after'])} after.", "",
             "Medians (min-max); ratio to glibc; lower is better. Peak: most "
             "memory held (RSS plus hugetlbfs pages); huge: of it, on huge "
             "pages (AnonHugePages plus hugetlbfs) at that moment; set-up: "
             "median seconds of the allocation phase, before the timed one. "
             "Control: glibc with every heap and mapping hand-advised "
             "(MADV_HUGEPAGE, glibc.malloc.hugetlb=1; in W7 and W8 the "
             "program advises its own mapping), as much on huge pages "
             "as the host gives; its gain over glibc is the host's limit, "
             "and \"share\" is the part of that gain a configuration got "
             "(1.00 all of it, above 1 more; n/a where the host gains less "
             "than 3%).", ""]
    timed = [w for w in rows if "control" in rows[w]]
    if timed:
        lines += ["## The host's gain and hugepreload's share of it", "",
                  "| workload | glibc | control | host gain | hugepreload | "
                  "share | vs control |", "|---|---|---|---|---|---|---|"]
        for w in timed:
            g, c = rows[w].get("glibc", {}), rows[w]["control"]
            # The default configuration, else the first of ours run.
            name = next((n for n in ["hugepreload", "hugepreload-learn-je"] +
                         sorted(rows[w])
                         if n.startswith("hugepreload") and n in rows[w]),
                        "hugepreload")
            h = rows[w].get(name, {})
            if "median" not in g or "median" not in c:
                continue
            share = h.get("share_of_gain")
            head = (f"| {w} ({WORKLOADS[w][2]}) | {g['median']:.2f} | "
                    f"{c['median']:.2f} | {g['median'] / c['median']:.2f}x | ")
            if "median" not in h:
                lines.append(head + f"error ({name}) | n/a | |")
                continue
            lines.append(
                head + f"{h['median']:.2f}"
                f"{'' if name == 'hugepreload' else f' ({name})'} | "
                f"{'n/a' if share is None else f'{share:.2f}'} | "
                f"{h['median'] / c['median']:.3f}x |")
        lines.append("")
    for w, per in rows.items():
        unit = WORKLOADS[w][2]
        lines += [f"## {w}: {unit}", "",
                  "| configuration | median | min-max | ratio | share | "
                  "peak MiB | huge MiB | set-up s |",
                  "|---|---|---|---|---|---|---|---|"]
        for c, row in per.items():
            if "error" in row:
                lines.append(f"| {c} | error: {row['error']} | | | | | | |")
                continue
            mib = lambda kb: "" if kb is None else f"{kb / 1024:.0f}"
            sec = "" if row["setup_s"] is None else f"{row['setup_s']:.2f}"
            ratio = row.get("ratio_to_glibc")
            share = row.get("share_of_gain")
            shown = ("" if w not in timed else "n/a" if share is None
                     else f"{share:.2f}")
            name = f"**{c}**" if c.startswith("hugepreload") else c
            lines.append(f"| {name} | {fmt(unit, row['median'])} | "
                         f"{fmt(unit, row['min'])}-{fmt(unit, row['max'])} | "
                         f"{'' if ratio is None else f'{ratio:.2f}'} | "
                         f"{shown} | {mib(row['peak_kb'])} | "
                         f"{mib(row['huge_kb'])} | {sec} |")
        lines.append("")
    lines += long_lived_table(rows)
    lines += learn_target_table(rows)
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    chart(rows, outdir, meta)
    print(f"written: {outdir}/results.json, results.md, results.png")


# The two long_lived settings, and the rule that names a winner: lower by
# more than 3% (1% for exact instruction counts), else a tie.
LL = {"jemalloc": "hugepreload-learn-je", "mimalloc": "hugepreload-learn"}
LL_SETUP = {"W3"}


def long_lived_table(rows):
    """Both long_lived settings beside the best peer of each measure (any
    configuration not hugepreload's; the control where it is glibc's
    own tunable), and which setting wins."""
    lines = ["## long_lived: jemalloc against mimalloc", "",
             "Best peer: the lowest median of the configurations not "
             "hugepreload's. A setting wins a measure when its median is "
             "lower by more than 3% (instruction counts: 1%); else a tie.",
             "", "| measure | best peer | jemalloc | mimalloc | winner |",
             "|---|---|---|---|---|"]
    wins = {"jemalloc": 0, "mimalloc": 0, "tie": 0}
    left_out = 0
    for w, per in rows.items():
        if not any(c in per for c in LL.values()):
            continue
        if not all("median" in per.get(c, {}) for c in LL.values()):
            left_out += 1
            lines.append(f"| {w} {WORKLOADS[w][2]} | | " + " | ".join(
                "error" if "median" not in per.get(LL[k], {}) else
                fmt(WORKLOADS[w][2], per[LL[k]]["median"])
                for k in ("jemalloc", "mimalloc")) + " | not counted |")
            continue
        measures = [(f"{w} {WORKLOADS[w][2]}", "median", fmt)]
        if w in LL_SETUP:
            measures.append((f"{w} set-up s", "setup_s",
                             lambda u, v: f"{v:.2f}"))
        for label, key, show in measures:
            unit = WORKLOADS[w][2]
            peers = {c: r[key] for c, r in per.items()
                     if not c.startswith("hugepreload") and
                     r.get(key) is not None and
                     (c != "control" or w not in CONTROL_ARGV)}
            je, mi = (per[LL[k]].get(key) for k in ("jemalloc", "mimalloc"))
            if je is None or mi is None:
                continue
            margin = 0.99 if w in EXACT else 0.97
            win = ("mimalloc" if mi < je * margin else
                   "jemalloc" if je < mi * margin else "tie")
            wins[win] += 1
            if peers:
                best = min(peers, key=peers.get)
                bv = peers[best]
                rel = lambda v: f" ({v / bv:.3f}x)" if bv else ""
                peer = f"{show(unit, bv)} {best}"
            else:
                rel, peer = (lambda v: ""), "none"
            lines.append(f"| {label} | {peer} | {show(unit, je)}{rel(je)} | "
                         f"{show(unit, mi)}{rel(mi)} | {win} |")
    if len(lines) == 6:
        return []
    lines += ["", f"jemalloc wins {wins['jemalloc']}, mimalloc "
              f"{wins['mimalloc']}, ties {wins['tie']}"
              f"{f'; {left_out} left out (an error)' if left_out else ''}.",
              ""]
    return lines


def learn_target_table(rows):
    """W3 under lifetime:learn against the long-lived class's target: the
    hot phase at most 1.00x the best peer's median, set-up at most 2x.
    Set-up is also shown against the best peer with the same pool setting:
    reserved hugetlbfs pages are already the guest's, while THP and 4 KiB
    pages are first-touched on the host (on this VM the same run's set-up
    varies 5x between rounds)."""
    per = rows.get("W3", {})
    # replay: the learn run's profile from the first allocation, so no
    # object waits lifetime_ms on 4 KiB pages: the reference for learn.
    ours = [c for c in per if (c.startswith("hugepreload-learn") or
                               c == "hugepreload-replay") and
            "median" in per[c]]
    peers = {c: r for c, r in per.items() if not c.startswith("hugepreload")
             and "median" in r}
    if not ours or not peers:
        return []
    best = lambda key, cs: min(((peers[c][key], c) for c in cs
                                if peers[c].get(key) is not None),
                               default=(None, None))
    bn, bnc = best("median", peers)
    bs, bsc = best("setup_s", peers)
    lines = ["## W3 under lifetime:learn against the target", "",
             f"Target: ns/load at most 1.00x the best peer's ({bn:.2f}, "
             f"{bnc}); set-up at most 2x the best peer's ({bs:.2f} s, {bsc})."
             " Same pool: the best peer with the same hugetlbfs pool "
             "setting (pool: " + ", ".join(c for c in peers
                                           if CONFIGS[c][1]) + ").", "",
             "| configuration | pool | ns/load | vs best | set-up s | "
             "vs best | vs best, same pool | not on huge pages MiB |",
             "|---|---|---|---|---|---|---|---|"]
    for c in ours:
        r, pool = per[c], CONFIGS[c][1]
        ss, ssc = best("setup_s", [p for p in peers if CONFIGS[p][1] == pool])
        off = (None if r.get("peak_kb") is None or r.get("huge_kb") is None
               else (r["peak_kb"] - r["huge_kb"]) / 1024)
        rs = r.get("setup_s")
        lines.append(
            f"| {c} | {'yes' if pool else 'no'} | {r['median']:.2f} | "
            f"{r['median'] / bn:.3f}x | "
            f"{'' if rs is None else f'{rs:.2f}'} | "
            f"{'' if rs is None or not bs else f'{rs / bs:.2f}x'} | "
            f"{'' if rs is None or not ss else f'{rs / ss:.2f}x ({ssc})'} | "
            f"{'' if off is None else f'{off:.0f}'} |")
    return lines + [""] + peers_rule_line(peers)


def peers_rule_line(peers):
    """The ns/load half's rule applied to the peers themselves: each one
    against the best of the others, in the same run. The best of several
    medians is the luckiest: how far the others sit from it is what a
    configuration as fast as they are can expect."""
    ns = {c: r["median"] for c, r in peers.items() if r.get("median")}
    if len(ns) < 2:
        return []
    part = []
    for c in sorted(ns):
        others = min(v for o, v in ns.items() if o != c)
        part.append(f"{c} {ns[c] / others:.3f}x")
    return ["The ns/load rule held against the peers themselves (each "
            "peer's median against the best of the other peers'; only "
            "the best one can meet it): " + ", ".join(part) + ".", ""]


def chart(rows, outdir, meta):
    """Two panels, ratios to glibc on a log scale: time (timed workloads)
    and memory (W4/W4r's excess, and every workload's peak). Clusters are
    workloads, one bar per configuration, hugepreload's in red; bars past
    the axis are clipped and their value printed above them."""
    configs = [c for c in CONFIGS if any(c in rows[w] for w in rows)]
    time_w = [w for w in rows if w not in CONCURRENT and w not in EXACT]
    panels = [("time", "time, ratio to glibc",
               [(w, {c: r.get("ratio_to_glibc") for c, r in rows[w].items()})
                for w in time_w])]
    mem = [(w, {c: r.get("ratio_to_glibc") for c, r in rows[w].items()})
           for w in rows if w in CONCURRENT]
    mem += [(w + " peak", {c: r.get("peak_ratio") for c, r in rows[w].items()})
            for w in rows if w not in CONCURRENT and w not in EXACT]
    panels.append(("memory", "memory (W4/W4r: kB over live; others: peak), "
                   "ratio to glibc", mem))
    if not any(v for _, _, ws in panels for _, per in ws for v in per.values()):
        print("no chart: glibc was not in the run (the chart shows ratios "
              "to glibc)")
        return
    lo, hi = 0.25, 4.0
    palette = ["#4c72b0", "#6a8fc8", "#55a868", "#7fbf8f", "#8172b2",
               "#a597cc", "#937860", "#b59f8a", "#999999", "#bbbbbb"]
    colors, k = {}, 0
    for c in configs:
        if c.startswith("hugepreload"):
            colors[c] = ["#d62728", "#ff7f0e", "#e377c2", "#bcbd22"][
                sum(1 for x in colors if x.startswith("hugepreload")) % 4]
        else:
            colors[c] = palette[k % len(palette)]
            k += 1
    n = len(configs)
    w = 0.8 / n                                  # bar width; clusters at 0, 1, ..
    off = {c: (j - (n - 1) / 2) * w for j, c in enumerate(configs)}
    script = [f"set terminal pngcairo size 1500,1000 font ',10' noenhanced",
              f"set output '{outdir}/results.png'",
              "set multiplot layout 2,1 title 'hugepreload benchmark "
              f"{meta['date']}: median ratio to glibc, log scale, lower is "
              f"better; hugepreload in red/orange; clipped bars carry their "
              f"value'",
              "set style fill solid 0.9 border -1",
              "set key outside right", "set grid ytics",
              "set logscale y 2", f"set yrange [{lo}:{hi}]",
              "set ytics (0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4)"]
    for name, title, ws in panels:
        data = os.path.join(outdir, f"{name}.dat")
        with open(data, "w") as f:
            f.write("# workload " + " ".join(configs) + "\n")
            for wl, per in ws:
                f.write(wl.replace(" ", "_") + " " + " ".join(
                    "NaN" if not per.get(c) else
                    f"{min(max(per[c], lo), hi):.4f}" for c in configs) + "\n")
        labels = [f"set label '{v:.2g}' at {i + off[c]:.3f},"
                  f"{hi * 0.9 if v > hi else lo * 1.1} center font ',8' front"
                  for i, (wl, per) in enumerate(ws) for c in configs
                  if (v := per.get(c)) and (v > hi or v < lo)]
        tics = ", ".join(f"'{wl}' {i}" for i, (wl, _) in enumerate(ws))
        script += [f"set title '{title}'", "unset label",
                   f"set xtics ({tics})",
                   f"set xrange [-0.5:{len(ws) - 0.5}]"] + labels + [
            "plot " + ", ".join(
                f"'{data}' using ($0 + {off[c]:.4f}):{j + 2}:({w:.4f})"
                f" with boxes title '{c}' "
                f"lc rgb '{colors[c]}'" for j, c in enumerate(configs)) +
            ", 1 with lines lc rgb 'black' dt 2 notitle"]
    script.append("unset multiplot")
    try:
        subprocess.run(["gnuplot"], input="\n".join(script) + "\n",
                       text=True, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no chart: gnuplot failed ({e})")


if __name__ == "__main__":
    sys.exit(main())

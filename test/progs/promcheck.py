"""Checks Prometheus text exposition format (version 0.0.4) on stdin:
HELP and TYPE lines before a metric's samples, once each, valid metric and
label names, escaped label values, numeric values, no series twice; the
whole text UTF-8 (node_exporter refuses a textfile that is not) with no
control character but the newline (stricter than the format: a label
value must not carry a terminal escape). Exit 0 and "ok N samples" if it
holds, else 1 and the first problem."""
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(\{{{LABEL}(?:,{LABEL})*\}})? "
                    r"(-?[0-9.eE+-]+|NaN|[+-]Inf)$")
typed, helped, samples, series = {}, set(), 0, set()
data = sys.stdin.buffer.read()
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit(f"byte {e.start}: not UTF-8: {data[e.start:e.start + 8]!r}")
for n, line in enumerate(text.split("\n"), 1):
    bad = [c for c in line if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f]
    if bad:
        sys.exit(f"line {n}: control character U+{ord(bad[0]):04X}: {line!r}")
    if line.startswith("# HELP "):
        name = line.split()[2]
        if not re.fullmatch(NAME, name) or name in helped:
            sys.exit(f"line {n}: bad or repeated HELP: {line}")
        helped.add(name)
    elif line.startswith("# TYPE "):
        parts = line.split()
        if len(parts) != 4 or parts[3] not in ("counter", "gauge",
                                                "histogram", "summary",
                                                "untyped"):
            sys.exit(f"line {n}: bad TYPE: {line}")
        if parts[2] in typed:
            sys.exit(f"line {n}: TYPE repeated: {line}")
        typed[parts[2]] = parts[3]
    elif line.startswith("#") or not line:
        continue
    else:
        m = SAMPLE.match(line)
        if not m:
            sys.exit(f"line {n}: bad sample: {line}")
        if m.group(1) not in typed or m.group(1) not in helped:
            sys.exit(f"line {n}: sample before HELP/TYPE: {line}")
        if typed[m.group(1)] == "counter" and not m.group(1).endswith("_total"):
            sys.exit(f"line {n}: counter without _total: {line}")
        float(m.group(3))
        if (m.group(1), m.group(2)) in series:
            sys.exit(f"line {n}: the same series twice: {line}")
        series.add((m.group(1), m.group(2)))
        samples += 1
if samples == 0:
    sys.exit("no samples")
print(f"ok {samples} samples")

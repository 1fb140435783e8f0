"""Checks that stdin is text a terminal shows as it is: well-formed UTF-8
with no control character (C0 but newline, DEL, C1 U+0080-U+009F); with
--json, also that it parses as one JSON document. Exit 0 and "clean N
bytes" if it holds, else 1 and the first problem."""
import json
import sys

data = sys.stdin.buffer.read()
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit(f"byte {e.start}: not UTF-8: {data[e.start:e.start + 8]!r}")
for i, c in enumerate(text):
    if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f:
        sys.exit(f"character {i}: control U+{ord(c):04X}: "
                 f"{text[max(0, i - 20):i + 8]!r}")
if "--json" in sys.argv[1:]:
    try:
        json.loads(text)
    except ValueError as e:
        sys.exit(f"not JSON: {e}")
print(f"clean {len(data)} bytes")

# Builds a large dict and JSON-encodes it; the output must not depend on
# the allocator underneath.
import json
import random

rng = random.Random(7)
d = {}
for i in range(300000):
    d["k%07d" % i] = {"n": i, "f": rng.random(), "s": "x" * (i % 50),
                      "l": list(range(i % 7))}
blob = json.dumps(d, sort_keys=True)
print(len(blob))
print(blob[:200000])
print(blob[-1000:])

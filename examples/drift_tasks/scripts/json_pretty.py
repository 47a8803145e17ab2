"""Pretty-print a JSON object with sorted keys, then list its top-level keys."""
import json
import sys

data = json.loads(sys.stdin.read())
print(json.dumps(data, indent=2, sort_keys=True))
print("keys:", ", ".join(sorted(data)))

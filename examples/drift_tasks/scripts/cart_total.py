"""Line totals with tax and the grand total of a shopping cart (JSON in, JSON out)."""
import functools
import json
import operator
import sys


def line_total(entry: dict, *, tax_rate: float) -> float:
    return entry["price"] * entry["qty"] * (1 + tax_rate)


cart = json.loads(sys.stdin.read())
rate = cart["tax_rate"]
totals = [line_total(entry, tax_rate=rate) for entry in cart["items"]]
grand = functools.reduce(operator.add, totals, 0.0)
print(json.dumps({"lines": [round(t, 2) for t in totals], "grand_total": round(grand, 2)}, sort_keys=True))

"""Orders (JSON) to a per-customer report: order count, spend, first and last order date."""
import json
import sys
from datetime import datetime, timedelta


class CustomerStats:
    def __init__(self, name: str):
        self.name = name
        self.orders = 0
        self.spend = 0.0
        self.dates = []

    def add(self, amount: float, when: datetime) -> None:
        self.orders += 1
        self.spend += amount
        self.dates.append(when)

    def summary(self) -> dict:
        first, last = min(self.dates), max(self.dates)
        return {
            "orders": self.orders,
            "spend": round(self.spend, 2),
            "first": first.strftime("%Y-%m-%d"),
            "days_active": (last - first) // timedelta(days=1),
        }


customers = {}
for order in json.loads(sys.stdin.read()):
    when = datetime.strptime(order["date"], "%Y-%m-%d")
    customers.setdefault(order["customer"], CustomerStats(order["customer"]))
    customers[order["customer"]].add(float(order["amount"]), when)
report = {name: customers[name].summary() for name in sorted(customers)}
print(json.dumps(report, indent=1, sort_keys=True))

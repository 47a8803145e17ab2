"""Value each stock item (quantity x price) and rank them."""
import json
import sys
from dataclasses import dataclass


@dataclass
class Item:
    name: str
    quantity: int
    price: float

    def value(self) -> float:
        return self.quantity * self.price


def load(text: str) -> list[Item]:
    return [Item(name=entry["name"], quantity=entry["qty"], price=entry["price"]) for entry in json.loads(text)]


items = load(sys.stdin.read())
for item in sorted(items, key=lambda i: (-i.value(), i.name)):
    print(f"{item.name}: {item.quantity} x {item.price:.2f} = {item.value():.2f}")
print("total:", round(sum(i.value() for i in items), 2))

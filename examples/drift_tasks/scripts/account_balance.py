"""Apply deposits and withdrawals to an account with exact decimal arithmetic."""
import sys
from decimal import ROUND_HALF_UP, Decimal


class Account:
    def __init__(self, owner: str):
        self.owner = owner
        self.balance = Decimal("0")
        self.history = []

    def apply(self, kind: str, amount: Decimal) -> None:
        sign = 1 if kind == "deposit" else -1
        self.balance += sign * amount
        self.history.append((kind, amount))


account = Account(sys.stdin.readline().strip())
for line in sys.stdin.read().splitlines():
    kind, raw = line.split()
    account.apply(kind, Decimal(raw))
cents = account.balance.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
print(f"{account.owner}: {cents} after {len(account.history)} operations")

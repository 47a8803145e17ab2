"""A vending machine state machine driven by commands: coin N, select ITEM, refund."""
import sys
from dataclasses import dataclass, field
from enum import Enum


class State(Enum):
    IDLE = "idle"
    PAYING = "paying"


@dataclass
class Machine:
    prices: dict
    credit: int = 0
    state: State = State.IDLE
    sold: list = field(default_factory=list)
    log: list = field(default_factory=list)

    def insert(self, cents: int) -> None:
        self.credit += cents
        self.state = State.PAYING
        self.log.append(f"credit {self.credit}")

    def select(self, item: str) -> None:
        price = self.prices[item]
        if self.credit >= price:
            self.credit -= price
            self.sold.append(item)
            self.log.append(f"vend {item}, change {self.credit}")
            self.credit, self.state = 0, State.IDLE
        else:
            self.log.append(f"need {price - self.credit} more for {item}")

    def refund(self) -> None:
        self.log.append(f"refund {self.credit}")
        self.credit, self.state = 0, State.IDLE


lines = sys.stdin.read().splitlines()
machine = Machine(prices={name: int(price) for name, price in (pair.split("=") for pair in lines[0].split())})
for command in lines[1:]:
    verb, _, argument = command.partition(" ")
    getattr(machine, verb)(int(argument) if verb == "insert" else argument) if argument else getattr(machine, verb)()
print("\n".join(machine.log))
print("sold:", ", ".join(machine.sold) or "nothing", "| final state:", machine.state.value)

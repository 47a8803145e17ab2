"""Stock levels per SKU."""


class InsufficientStock(ValueError):
    """Raised when more units are removed than are in stock."""


class Inventory:
    def __init__(self):
        self._stock = {}
        self._prices = {}

    def add(self, sku, quantity, unit_price):
        """Receive ``quantity`` units of ``sku``; the latest unit price wins."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self._stock[sku] = self._stock.get(sku, 0) + quantity
        self._prices[sku] = unit_price

    def remove(self, sku, quantity):
        """Ship ``quantity`` units of ``sku``; never lets the stock go negative."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self._stock[sku] = self._stock.get(sku, 0) - quantity

    def quantity(self, sku):
        return self._stock.get(sku, 0)

    def total_value(self):
        """Value of everything in stock at the latest unit prices."""
        return sum(qty * self._prices[sku] for sku, qty in self._stock.items())

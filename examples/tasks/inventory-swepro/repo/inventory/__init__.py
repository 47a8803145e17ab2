"""An in-memory stock ledger."""

from inventory.store import InsufficientStock, Inventory

__all__ = ["Inventory", "InsufficientStock"]

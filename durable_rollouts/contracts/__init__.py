"""Pydantic contracts: what workflows, activities, the adapter and the trainer exchange (pydantic only, safe in the
workflow sandbox)."""

import pytest

from inventory import InsufficientStock, Inventory


@pytest.fixture
def inv():
    inventory = Inventory()
    inventory.add("apple", 10, 0.5)
    inventory.add("pear", 4, 1.25)
    return inventory


def test_add_accumulates(inv):
    inv.add("apple", 5, 0.5)
    assert inv.quantity("apple") == 15


def test_total_value(inv):
    assert inv.total_value() == pytest.approx(10)


def test_remove_within_stock(inv):
    inv.remove("pear", 3)
    assert inv.quantity("pear") == 1


def test_remove_more_than_stock_raises(inv):
    with pytest.raises(InsufficientStock):
        inv.remove("pear", 5)
    assert inv.quantity("pear") == 4


def test_remove_unknown_sku_raises(inv):
    with pytest.raises(InsufficientStock):
        inv.remove("plum", 1)


@pytest.mark.parametrize("quantity", [0, -1])
def test_rejects_non_positive_quantities(inv, quantity):
    with pytest.raises(ValueError):
        inv.add("apple", quantity, 0.5)

"""The part of a metric meter the library records on: the shape of Temporal's ``MetricMeter``, so a worker
passes its runtime's and every series comes out of its one Prometheus endpoint, without the library
importing Temporal. ``NoMeter`` records nothing."""

from __future__ import annotations

from typing import Any, Protocol


class Meter(Protocol):
    """The part of a metric meter (Temporal's ``MetricMeter``) that ``HostMetrics`` uses."""

    def create_counter(self, name: str, description: str | None = None, unit: str | None = None) -> Any: ...

    def create_histogram_float(self, name: str, description: str | None = None, unit: str | None = None) -> Any: ...

    def create_gauge(self, name: str, description: str | None = None, unit: str | None = None) -> Any: ...


class _Unrecorded:
    """An instrument that drops what it is given."""

    def add(self, value: int, attributes: dict[str, str] | None = None) -> None:
        pass

    def record(self, value: float, attributes: dict[str, str] | None = None) -> None:
        pass

    def set(self, value: int, attributes: dict[str, str] | None = None) -> None:
        pass


class NoMeter:
    """A meter whose instruments record nothing."""

    def create_counter(self, name: str, description: str | None = None, unit: str | None = None) -> _Unrecorded:
        return _Unrecorded()

    create_histogram_float = create_counter
    create_gauge = create_counter

"""Which known shape a flat dataset row has, and its ``TaskSpec`` fields.

A shape is a name, the fields it needs (in the order errors name them), the
predicate by which it claims a row and the function that maps the row;
``SHAPES`` are tried in order and the first that claims a row reads it.
A claimed row that lacks a needed field is refused naming that field; a row
no shape claims is refused as ``row: not a known shape``, naming the fields
the closest shape (the one whose needs it meets most, the first on a tie) lacks.

``locate`` finds the shape's fields by keys only the dataset shapes carry
(``SHAPE_KEYS``; ``repo``, ``base_commit``, ``patch``, ``image`` and the like
are generic and never decide). A row with ``metadata`` is a shape row iff its
``metadata`` holds a ``SHAPE_KEYS`` key and none of slime's own metadata keys
(``SLIME_KEYS``), and then the fields are ``metadata``'s; so a SWE-bench row
under ``metadata.remote_env_info`` stays with the slime reader. A row without
``metadata`` is a shape row, read at the top level, iff it has no ``prompt``
or holds a ``SHAPE_KEYS`` key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from durable_rollouts.task_sources.row_shapes import swe_bench, swe_gym, swe_rebench, swe_smith
from durable_rollouts.task_sources.row_shapes.fields import ShapeProblem

Fields = Mapping[str, Any]


def _absent(needs: tuple[str, ...]) -> Callable[[Fields], list[str]]:
    return lambda fields: [key for key in needs if fields.get(key) is None]


@dataclass(frozen=True)
class RowShape:
    name: str
    needs: tuple[str, ...]
    claims: Callable[[Fields], bool]
    task: Callable[[Fields], dict[str, Any]]
    missing: Callable[[Fields], list[str]]

    def describe(self) -> str:
        return f"a {self.name} row needs {', '.join(self.needs)}"


SHAPES = (
    RowShape(swe_smith.NAME, swe_smith.NEEDS, swe_smith.claims, swe_smith.task, swe_smith.missing),
    RowShape(swe_rebench.NAME, swe_rebench.NEEDS, swe_rebench.claims, swe_rebench.task, _absent(swe_rebench.NEEDS)),
    RowShape(swe_gym.NAME, swe_gym.NEEDS, swe_gym.claims, swe_gym.task, _absent(swe_gym.NEEDS)),
    RowShape(swe_bench.NAME, swe_bench.NEEDS, swe_bench.claims, swe_bench.task, _absent(swe_bench.NEEDS)),
)
# Keys only the dataset shapes carry: they mark a mapping as a flat dataset row.
SHAPE_KEYS = frozenset({"test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "image_name", "install_config", "docker_image"})
# Keys of slime's own metadata: a metadata holding one is read by the slime reader.
SLIME_KEYS = frozenset(
    {"remote_env_info", "workdir", "eval_cmd", "swepro", "pre_commands", "reference_patch", "test_files"}
)


def locate(row: Mapping[str, Any]) -> tuple[str, Fields] | None:
    """(the prefix of its field names, the shape fields) of a row in a dataset shape, or None for slime's shapes."""
    if "metadata" in row:
        metadata = row["metadata"]
        if isinstance(metadata, Mapping) and SHAPE_KEYS & metadata.keys() and not SLIME_KEYS & metadata.keys():
            return "metadata.", metadata
        return None
    if "prompt" not in row or SHAPE_KEYS & row.keys():
        return "", row
    return None


def shape_of(fields: Fields) -> RowShape:
    """The shape that claims ``fields`` and finds all it needs there; ``ShapeProblem`` otherwise."""
    shape = next((shape for shape in SHAPES if shape.claims(fields)), None)
    if shape is None:
        closest = max(SHAPES, key=lambda candidate: len(candidate.needs) - len(candidate.missing(fields)))
        raise ShapeProblem(
            "row", f"not a known shape: {closest.describe()}: missing {', '.join(closest.missing(fields))}"
        )
    absent = shape.missing(fields)
    if absent:
        more = f" (and {', '.join(absent[1:])})" if absent[1:] else ""
        raise ShapeProblem(absent[0], f"missing{more}: {shape.describe()}")
    return shape


def task_fields(fields: Fields) -> tuple[RowShape, dict[str, Any]]:
    shape = shape_of(fields)
    return shape, shape.task(fields)

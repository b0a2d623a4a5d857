"""What a workload is to the rest of the harness: a named piece of work that validates a
precision recipe up front and turns it into tensors plus float64 references.

Adding a workload kind: a module here with a frozen dataclass that has these members, and one
line in ``workloads/__init__.py``'s ``WORKLOAD_KINDS`` so plan files can name it.
"""

from __future__ import annotations

from typing import Any, Protocol


class Workload(Protocol):
    kind: str
    name: str

    @property
    def label(self) -> str:
        """Short text for tables and progress lines (a matmul's MxKxN)."""

    @property
    def flops(self) -> int: ...

    def validate(self, bits: int, block_size: int) -> None:
        """Raise ValueError with one clear line when this workload cannot run at these bits."""

    def row_fields(self, bits: int, block_size: int) -> dict[str, Any]:
        """This workload's own columns of a result row (a matmul's m, k, n; a model's name,
        batch and sequence length)."""

    def to_json(self) -> dict[str, Any]: ...

"""One view's streams paired by stamp: each lead message (depth, say) joined to the nearest partner of each kind.

Used wherever messages of one camera arrive on separate topics and must be matched by header stamp
(color with depth for a snapshot; depth with camera info, color and depth info for a projection).
Items are kept as received (undecoded): the caller decodes only the groups it uses.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["StampGroup", "StampPairer"]


@dataclass(frozen=True)
class StampGroup:
    """A lead item and one partner per kind, all within the pairer's tolerance of the lead's stamp."""

    stamp_s: float
    items: dict[str, Any]  # kind -> item (the lead's kind included)


class StampPairer:
    """Pairs each ``lead`` item with the nearest item of every ``partners`` kind within ``tolerance_s``.

    Each lead item completes at most one group and is dropped once it did; partner items stay (one
    camera info serves many depth frames). At most ``keep`` items of each kind wait; the oldest go first.
    With no partners, every lead item is a group at once. Not thread-safe: the caller holds its lock.
    """

    def __init__(self, lead: str, partners: Sequence[str], tolerance_s: float, keep: int = 10) -> None:
        if lead in partners:
            raise ValueError(f"lead kind {lead!r} is also a partner kind")
        self.lead = lead
        self.partners = tuple(partners)
        self.tolerance_s = float(tolerance_s)
        self._pending: dict[str, collections.deque[tuple[float, Any]]] = {
            kind: collections.deque(maxlen=keep) for kind in (lead, *self.partners)
        }

    def add(self, kind: str, stamp_s: float, item: Any) -> list[StampGroup]:
        """Take one item; return the groups it completed (oldest lead first)."""
        if kind not in self._pending:
            raise ValueError(f"unknown stream kind {kind!r}; expected one of {sorted(self._pending)}")
        self._pending[kind].append((float(stamp_s), item))
        groups = []
        leads = self._pending[self.lead]
        for entry in list(leads):
            stamp, lead_item = entry
            found = {kind: self._nearest(kind, stamp) for kind in self.partners}
            if any(partner is None for partner in found.values()):
                continue
            leads.remove(entry)
            groups.append(StampGroup(stamp, {self.lead: lead_item, **found}))
        return groups

    def _nearest(self, kind: str, stamp_s: float) -> Any:
        best = min(self._pending[kind], key=lambda entry: abs(entry[0] - stamp_s), default=None)
        return best[1] if best is not None and abs(best[0] - stamp_s) <= self.tolerance_s else None

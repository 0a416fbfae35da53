"""Producer ids handed out in blocks, the block's end made durable before any id from it is used.

So a broker that restarts never reissues an id whose sequences are still in some log. When the
metadata quorum arrives (docs/architecture.md §5) the block comes from it instead of this file.
"""

from __future__ import annotations

import json
from pathlib import Path

from storage.checkpoint import atomic_write

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "producer_ids.json"
        self._next = 0
        self._block_end = 0

    def load(self) -> None:
        """Continue after the last block handed out (at start, once the data directory exists)."""
        if self.path.exists():
            self._next = self._block_end = int(json.loads(self.path.read_text())["next_block_start"])

    def allocate(self) -> int:
        if self._next >= self._block_end:
            end = self._block_end + BLOCK_SIZE
            # Durable (file and directory fsynced) before any id of the block is handed out.
            atomic_write(self.path, json.dumps({"version": 1, "next_block_start": end}).encode())
            self._next, self._block_end = self._block_end, end
        pid = self._next
        self._next += 1
        return pid

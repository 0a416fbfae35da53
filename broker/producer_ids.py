"""Producer ids handed out in blocks, the block's end made durable before any id from it is used.

So a broker that restarts never reissues an id whose sequences are still in some log. When the
metadata quorum arrives (design.md §6) the block comes from it instead of this file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "producer_ids.json"
        self._next = 0
        self._block_end = 0
        if self.path.exists():
            self._next = self._block_end = int(json.loads(self.path.read_text())["next_block_start"])

    def allocate(self) -> int:
        if self._next >= self._block_end:
            end = self._block_end + BLOCK_SIZE
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as fh:
                json.dump({"version": 1, "next_block_start": end}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            self._next, self._block_end = self._block_end, end
        pid = self._next
        self._next += 1
        return pid

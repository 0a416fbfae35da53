"""``python -m tests.chaos.check HISTORY [--json OUT]``: judge a chaos workload history offline.

The checker lives in helpers.chaos.checker; this entry puts tests/ on the path so the command works
from the repository root. Exit status: 0 no anomalies, 1 anomalies, 2 the history is unreadable.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.chaos.checker import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

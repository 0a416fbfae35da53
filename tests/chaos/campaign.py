"""``python -m tests.chaos.campaign --seconds 3600 [--seed N]``: a long chaos campaign (``make chaos``).

The machinery lives in helpers.chaos.campaign; this entry puts tests/ on the path so the command works
from the repository root. docs/chaos.md explains the report and how to replay a seed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.chaos.campaign import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

"""The benchmarks' JSON names the commit it measured, in a worktree too (where .git is a file)."""

from __future__ import annotations

import re
import subprocess

from bench.targets import REPO_ROOT
from bench.throughput import git_commit


def test_the_commit_is_the_checkout_head_in_a_clone_or_a_worktree() -> None:
    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{40}", head)
    assert git_commit() == head

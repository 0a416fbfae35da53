"""Settings a broker cannot start with: one line naming the setting, the value and the problem,
a non-zero exit, no traceback, and the data directory left as it was (issue 11, item 12)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT, free_port


def _run(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args], cwd=cwd or REPO_ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def _one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode not in (0, None), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


def _broker(tmp_path: Path, *extra: str) -> list[str]:
    return ["broker", "--data-dir", str(tmp_path / "data"), *extra]


@pytest.mark.parametrize("listen, problem", [
    ("127.0.0.1:notaport", "port must be a number"),
    ("127.0.0.1:70000", "port must be a number"),
    ("no-port-at-all", "expected HOST:PORT"),
])
def test_a_bad_listen_address(tmp_path: Path, listen: str, problem: str) -> None:
    proc = _run(_broker(tmp_path, "--listen", listen))
    _one_line_error(proc, "listen", repr(listen), problem)
    assert not (tmp_path / "data").exists()


def test_a_port_already_in_use_leaves_the_data_directory_alone(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{port}"))
    _one_line_error(proc, "listen", f"127.0.0.1:{port}", "cannot listen there")
    assert not (tmp_path / "data").exists()


def test_a_metrics_port_already_in_use(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{free_port()}",
                            "--metrics-listen", f"127.0.0.1:{port}"))
    _one_line_error(proc, "metrics_listen", "cannot listen there")
    assert not (tmp_path / "data").exists()


def test_a_setting_from_the_environment_that_is_not_a_number(tmp_path: Path) -> None:
    proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{free_port()}"), env={"KETCH_FLUSH_MESSAGES": "abc"})
    _one_line_error(proc, "flush_messages", "'abc'", "KETCH_FLUSH_MESSAGES", "whole number")
    assert not (tmp_path / "data").exists()


def test_an_unknown_key_in_the_toml_file(tmp_path: Path) -> None:
    f = tmp_path / "ketch.toml"
    f.write_text('listen = "127.0.0.1:0"\nflush_mesages = 1\n')
    proc = _run(_broker(tmp_path, "--config", str(f)))
    _one_line_error(proc, "flush_mesages", "unknown setting", str(f))
    assert not (tmp_path / "data").exists()


def test_a_toml_value_of_the_wrong_type(tmp_path: Path) -> None:
    f = tmp_path / "ketch.toml"
    f.write_text('num_partitions = "many"\n')
    proc = _run(_broker(tmp_path, "--config", str(f), "--listen", f"127.0.0.1:{free_port()}"))
    _one_line_error(proc, "num_partitions", "'many'", "whole number")


def test_a_missing_or_broken_toml_file(tmp_path: Path) -> None:
    _one_line_error(_run(_broker(tmp_path, "--config", str(tmp_path / "nope.toml"))), "config", "cannot read")
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml\n")
    _one_line_error(_run(_broker(tmp_path, "--config", str(bad))), "config", "not valid TOML")


def test_a_data_directory_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    proc = _run(["broker", "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(blocker / "data")])
    _one_line_error(proc, "data_dir", "cannot create the directory")
    assert blocker.read_text() == "not a directory\n"


def test_a_negative_value(tmp_path: Path) -> None:
    proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{free_port()}"), env={"KETCH_NUM_PARTITIONS": "0"})
    _one_line_error(proc, "num_partitions", "at least 1")


def test_the_admin_cli_refuses_a_bad_bootstrap_address_in_one_line(tmp_path: Path) -> None:
    proc = _run(["topic", "list", "--bootstrap", "notaport"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "bootstrap" in proc.stderr and "expected HOST:PORT" in proc.stderr

"""`ketch broker` starts whatever client commands are installed: it loads none of them (a stale
editable install once made every chaos broker restart fail on an ImportError in an admin command)."""

from __future__ import annotations

from typing import Any

import pytest

import broker.cli as cli


class _Broken:
    name = "broken"

    def load(self) -> Any:
        raise ImportError("a client command that cannot be imported")


def test_the_broker_subcommand_does_not_load_client_commands(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "entry_points", lambda group: [_Broken()])
    with pytest.raises(SystemExit) as done:
        cli.main(["broker", "--help"])
    assert done.value.code == 0
    assert "--data-dir" in capsys.readouterr().out
    with pytest.raises(ImportError):  # other commands still need them, and say so
        cli.main(["topic", "--help"])

"""docker/healthcheck.py against a broker whose only client listener is SASL_SSL with the
authorizer on, as in the compose cluster's secure mode (issue 27): it must reach that listener
with the broker's own settings — its truststore, its login, a super user's — and nothing more."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT, wait_until
from helpers.broker import BrokerProcess, free_port

from broker.cluster_up import secure_setup

HEALTHCHECK = REPO_ROOT / "docker" / "healthcheck.py"


class _ListenersBroker(BrokerProcess):
    """A broker whose client listeners are all in KETCH_LISTENERS (no --listen)."""

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("--listen")
        del cmd[i:i + 4]  # --listen HOST:PORT --advertise HOST:PORT
        return cmd


def _healthcheck(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HEALTHCHECK)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=30, env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env})


def test_healthcheck_logs_in_to_a_sasl_ssl_listener_as_the_broker(tmp_path: Path) -> None:
    shared, _ = secure_setup(tmp_path, "127.0.0.1")
    port = free_port()
    env = {**shared, "KETCH_NODE_ID": "1", "KETCH_LISTENERS": f"SASL_SSL://127.0.0.1:{port}",
           "KETCH_AUTHORIZER": "true", "KETCH_SUPER_USERS": "User:broker"}
    with _ListenersBroker(tmp_path / "data", port=port, env=env).start() as b:
        checked = {**env, "KETCH_INTER_BROKER_LISTEN": b.inter_broker_bootstrap}
        last: list[subprocess.CompletedProcess[str]] = []
        wait_until(lambda: last.append(r := _healthcheck(checked)) or r.returncode == 0, timeout=30, interval=0.5,
                   message=lambda: f"a healthy verdict; the last: {last[-1].stdout.strip() if last else ''}")
        assert last[-1].stdout.startswith("healthy: broker 1 registered and alive")
        # it really logs in: with another password the same broker is not healthy
        wrong = _healthcheck({**checked, "KETCH_SASL_INTER_BROKER_PASSWORD": "not-the-password"})
        assert wrong.returncode == 1 and "unhealthy" in wrong.stdout

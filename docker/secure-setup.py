"""Certificates and logins for the compose cluster's secure mode (docker-compose.secure.yml).

    python docker/secure-setup.py [DIR]     # DIR defaults to docker/secure (git-ignored)

Run on the host, with the openssl command line, before `docker compose -f docker-compose.yml -f
docker-compose.secure.yml up`. Made once and kept (delete DIR for new ones), by the same code as
`ketch cluster up --secure` (broker/cluster_up.py): a CA, one broker certificate for ketch-1,
ketch-2, ketch-3, localhost and 127.0.0.1, PLAIN logins for the brokers and an administrator.
Writes into DIR:

  ca.pem, broker.pem, broker.key, plain-users   mounted read-only into each broker (ca.key is not)
  broker.env           the brokers' shared KETCH_* security settings, paths as mounted (/etc/ketch/secure)
  client.properties    the administrator's login for clients on the host (--command-config, librdkafka)

DIR is made 0700: the broker reads its key and the PLAIN users as uid 10001 through the bind
mounts, so those two files are 0644 inside a directory only the host's owner can enter.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's broker package, whatever is installed

from broker.cluster_up import admin_properties, broker_env, secure_files  # noqa: E402

NAMES = ("ketch-1", "ketch-2", "ketch-3", "localhost", "127.0.0.1")  # service names, and the host's loopback
MOUNTED = Path("/etc/ketch/secure")  # where docker-compose.secure.yml mounts the files


def main(argv: list[str]) -> int:
    d = Path(argv[1] if len(argv) > 1 else ROOT / "docker" / "secure").resolve()
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o700)
    logins = secure_files(d, NAMES)
    for name in ("broker.key", "plain-users"):
        (d / name).chmod(0o644)
    env = d / "broker.env"
    env.write_text("".join(f"{k}={v}\n" for k, v in broker_env(MOUNTED, logins).items()))
    env.chmod(0o600)
    props = admin_properties(d, logins)
    print(f"secure-setup: certificates and logins in {d}; the administrator's client properties: {props}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

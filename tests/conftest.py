"""Fixtures shared by every test suite: real Ketch broker subprocesses and unique topic names.

Layout and conventions: docs/testing.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # makes `import helpers` work whatever the rootdir / import mode
    sys.path.insert(0, str(TESTS_DIR))
if str(TESTS_DIR.parent) not in sys.path:  # and `import bench` (not an installed package)
    sys.path.append(str(TESTS_DIR.parent))

from helpers import BrokerError, BrokerProcess, Cluster, unique_topic  # noqa: E402
from helpers.raw import Raw  # noqa: E402

SUITES = ("unit", "integration", "compat", "chaos", "sim", "cluster")
# `make test` hands whole modules to pytest-xdist workers (`--dist loadfile`: a module's shared
# broker or cluster starts once; tests/spark goes whole, see pytest_xdist_make_scheduler) in
# collection order (`--no-loadscope-reorder`): the suites whose modules take longest first (a Spark
# driver-kill job alone takes about 4 minutes, tests/cluster/test_replication.py 5), the many short
# unit modules last, to fill the gaps at the end.
XDIST_ORDER = ("spark", "chaos", "cluster", "compat", "integration", "sim", "unit")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "unit: fast in-process tests (tests/unit), no broker process")
    config.addinivalue_line("markers", "integration: starts real broker processes (tests/integration)")
    config.addinivalue_line(
        "markers", "chaos: crash/fault-injection tests against real brokers (tests/chaos)"
    )
    config.addinivalue_line("markers", "spark: runs Apache Spark (tests/spark); deselect with -m 'not spark'")
    config.addinivalue_line("markers", "sim: seeded deterministic simulation of the metadata quorum (tests/sim)")
    config.addinivalue_line("markers", "cluster: several real broker processes in one quorum (tests/cluster)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test is marked with the suite (directory) it lives in, so `-m integration` etc. work.
    A pytest-xdist worker also puts the suites in the order work is handed out in."""
    for item in items:
        try:
            rel = Path(str(item.path)).resolve().relative_to(TESTS_DIR)
        except ValueError:
            continue
        if rel.parts and rel.parts[0] in SUITES:
            item.add_marker(getattr(pytest.mark, rel.parts[0]))
    if hasattr(config, "workerinput"):  # a pytest-xdist worker; every worker sorts alike
        items.sort(key=_xdist_rank)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown when xdist is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with tests/spark as one unit: its in-process tests share one SparkSession
    per worker process (tests/spark/conftest.py), and a JVM that takes 30 s to start alone took
    2-3 minutes when four workers started one each."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # noqa: PLC0415 - only under pytest-xdist

    class Scheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return "tests/spark" if nodeid.startswith("tests/spark/") else str(super()._split_scope(nodeid))

    return Scheduling(config, log)


def _xdist_rank(item: pytest.Item) -> int:
    try:
        suite = Path(str(item.path)).resolve().relative_to(TESTS_DIR).parts[0]
    except (ValueError, IndexError):
        return len(XDIST_ORDER)
    return XDIST_ORDER.index(suite) if suite in XDIST_ORDER else len(XDIST_ORDER)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """When a test fails, attach the tail of every live broker's log to its report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and rep.when in ("setup", "call"):
        for b in list(BrokerProcess.live):
            state = "running" if b.is_running() else f"exited ({b.proc.returncode if b.proc else None})"
            rep.sections.append((f"ketch broker {b.bootstrap} [{state}] log", b.log_tail(80)))


BrokerFactory = Callable[..., BrokerProcess]


def _factory(base: Path) -> tuple[BrokerFactory, list[BrokerProcess]]:
    made: list[BrokerProcess] = []

    def make(
        env: Mapping[str, str] | None = None,
        *,
        config: Path | str | None = None,
        data_dir: Path | str | None = None,
        port: int | None = None,
        start: bool = True,
        start_timeout: float = 30.0,
    ) -> BrokerProcess:
        n = len(made)
        b = BrokerProcess(
            data_dir if data_dir is not None else base / f"broker{n}" / "data",
            port=port,
            env=env,
            config=config,
            log_path=base / f"broker{n}" / "broker.log",
        )
        made.append(b)
        if start:
            b.start(start_timeout)
        return b

    return make, made


def _teardown(made: list[BrokerProcess]) -> None:
    """Stop every broker; a broker that died on its own, or ignores SIGTERM, fails the test."""
    problems = []
    for b in made:
        if b.died_unexpectedly():
            problems.append(f"{b!r} died during the test with exit code {b.proc.returncode}\n{b.log_tail()}")
        try:
            b.close()
        except BrokerError as exc:
            problems.append(str(exc))
    if problems:
        raise BrokerError("\n\n".join(problems))


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """Call ``broker_factory(env={...}, config=..., start=True)`` to get started brokers (fresh dirs)."""
    make, made = _factory(tmp_path)
    yield make
    _teardown(made)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A freshly started broker with default settings and an empty data directory."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a whole test module (tests must use unique topics). Faster, less isolated."""
    make, made = _factory(tmp_path_factory.mktemp("module-broker"))
    b = make()
    yield b
    _teardown(made)


ClusterFactory = Callable[..., Cluster]


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[ClusterFactory]:
    """``cluster_factory(3, env={...}, args_for=...)`` gives started clusters, stopped at teardown."""
    made: list[Cluster] = []

    def make(size: int = 3, *, start: bool = True, **kwargs: object) -> Cluster:
        c = Cluster(tmp_path / f"cluster{len(made)}", size, **kwargs)  # type: ignore[arg-type]
        made.append(c)
        return c.start() if start else c

    yield make
    problems = []
    for c in made:
        try:
            c.close()
        except BrokerError as exc:
            problems.append(str(exc))
    if problems:
        raise BrokerError("\n\n".join(problems))


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[Raw]:
    """A raw protocol connection to `broker` (a module may override `broker` with a shared one)."""
    c = Raw(broker.port)
    yield c
    c.close()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test invocation."""
    return unique_topic(request.node.name)

"""Issue 27: the exactly-once streaming pipeline over SASL_SSL with ACLs on. The source and the
sink take `kafka.security.protocol`, `kafka.sasl.*` and `kafka.ssl.*` and reach the broker's
SASL_SSL listener (the only one they are told of) as User:etl, which has only what a job needs:
READ on its input, WRITE (and READ: the sink's markers are offsets on it) on its output, WRITE on
the sink's transactional ids and READ on its marker groups. The broker's authorizer is on with
allow_everyone_if_no_acl_found false.

The harness's PLAINTEXT listener (User:ANONYMOUS, a super user here) makes the topics, writes the
input and reads the output back."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from helpers.acls import acl, create_acls, listed
from helpers.certs import make_certs
from helpers.confluent import QUIET
from helpers.secure import SecureBroker
from helpers.wait import wait_until
from pipeline_support import create_topics, produce_with_aborts, read_committed_sync
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from protocol.acl import AclOperation, PatternType, ResourceType

pytestmark = pytest.mark.spark

ETL = "User:etl"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SecureBroker, dict[str, str]]]:
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    b = SecureBroker(tmp_path_factory.mktemp("secure-pipeline") / "data", certs, env={
        "KETCH_AUTHORIZER": "true", "KETCH_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "false",
        "KETCH_SUPER_USERS": "User:ANONYMOUS"})
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap, **QUIET})
        for fut in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "etl", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"etl-secret")]).values():
            fut.result(30)
        yield b, {"kafka.bootstrap.servers": b.address("SASL_SSL"), "kafka.security.protocol": "SASL_SSL",
                  "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "etl",
                  "kafka.sasl.password": "etl-secret", "kafka.ssl.ca.location": str(certs.ca)}
    finally:
        b.close()


def test_exactly_once_stream_over_sasl_ssl_with_acls(spark: SparkSession, secured: tuple[SecureBroker, dict[str, str]],
                                                     topic: str, tmp_path: Path) -> None:
    broker, security = secured
    plain, out = broker.bootstrap, topic + "-out"
    asyncio.run(create_topics(plain, [topic, out]))
    needs = [acl(ResourceType.TOPIC, topic, AclOperation.READ, principal=ETL),
             acl(ResourceType.TOPIC, out, AclOperation.WRITE, principal=ETL),
             acl(ResourceType.TOPIC, out, AclOperation.READ, principal=ETL),
             acl(ResourceType.TRANSACTIONAL_ID, "ketch-sink-", AclOperation.WRITE, principal=ETL,
                 pattern=PatternType.PREFIXED),
             acl(ResourceType.GROUP, "ketch-sink-", AclOperation.READ, principal=ETL, pattern=PatternType.PREFIXED)]
    create_acls(broker.port, *needs)
    wait_until(lambda: set(needs) <= set(listed(broker.port)), timeout=10, message="the ACLs applied")
    committed = asyncio.run(produce_with_aborts(plain, topic, 200, txn_size=40, abort_every=3))

    src = (spark.readStream.format("ketch").options(**security).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").load())
    q = (src.select("key", F.concat(F.lit(b"out-"), F.col("value")).alias("value"))
         .writeStream.format("ketch").options(**security).option("topic", out)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert not q.isActive, "the availableNow query did not finish within 300s"
    assert q.exception() is None, q.exception()

    got = Counter((r.key, r.value) for r in read_committed_sync(plain, out))
    assert got == Counter((k, b"out-" + v) for k, v in committed)

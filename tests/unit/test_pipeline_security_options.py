"""Issue 27: the pipeline's `kafka.security.protocol`, `kafka.sasl.*` and `kafka.ssl.*` options
become the Security every client of the source and the sink connects with (what reaches the
brokers is tests/spark/test_pipeline_secure.py); a security option the clients cannot honour is
refused on the driver rather than dropped."""

from __future__ import annotations

import pickle

import pytest

from client import Security, security_from_properties
from pipeline.options import OptionError, sink_options, source_options

BASE = {"kafka.bootstrap.servers": "h:9094", "subscribe": "in", "topic": "out"}
SASL_SSL = {"kafka.security.protocol": "sasl_ssl", "kafka.sasl.mechanism": "scram-sha-512",
            "kafka.sasl.username": "etl", "kafka.sasl.password": "pw", "kafka.ssl.ca.location": "/c/ca.pem",
            "kafka.ssl.certificate.location": "/c/etl.pem", "kafka.ssl.key.location": "/c/etl.key"}
EXPECTED = Security("SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="etl", sasl_password="pw",
                    ssl_cafile="/c/ca.pem", ssl_certfile="/c/etl.pem", ssl_keyfile="/c/etl.key")


def test_source_and_sink_take_the_security_options() -> None:
    src = source_options({**BASE, **SASL_SSL}, streaming=True)
    sink = sink_options({**BASE, **SASL_SSL})
    assert src.security == EXPECTED
    assert sink.security == EXPECTED
    # shipped to the tasks pickled, and a key of the clients they keep
    assert pickle.loads(pickle.dumps(sink)).security == EXPECTED
    assert hash(src.security) == hash(EXPECTED)


def test_without_security_options_the_clients_are_plaintext() -> None:
    assert source_options(BASE, streaming=False).security == Security()
    assert sink_options(BASE).security == Security()


def test_spark_option_names_are_case_insensitive_and_jaas_logins_are_read() -> None:
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" '
            'password="p\\"w";')
    sink = sink_options({**BASE, "KAFKA.SECURITY.PROTOCOL": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                         "kafka.sasl.jaas.config": jaas})
    assert sink.security == Security("SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="etl",
                                     sasl_password='p"w')


def test_host_name_check_can_be_turned_off_as_in_kafka() -> None:
    sec = security_from_properties({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""})
    assert sec.ssl_check_hostname is False
    assert security_from_properties({"security.protocol": "SSL"}).ssl_check_hostname is True


@pytest.mark.parametrize("bad", [
    {"kafka.ssl.truststore.password": "changeit"},  # a Java keystore's: nothing here could use it
    {"kafka.security.protocol": "SASL_SSL"},  # SASL without a login
    {"kafka.security.protocol": "TLS"},
    {"kafka.sasl.jaas.config": "ScramLoginModule required username=\"etl\";"},
    {"kafka.ssl.endpoint.identification.algorithm": "dns"},
])
def test_a_security_option_that_cannot_be_honoured_is_refused(bad: dict[str, str]) -> None:
    with pytest.raises(OptionError):
        sink_options({**BASE, **bad})
    with pytest.raises(OptionError):
        source_options({**BASE, **bad}, streaming=True)

"""Byte-exact encodings of the security APIs and records (issue 27), worked out by hand from
Kafka's SaslHandshake/SaslAuthenticate/DescribeUserScramCredentials/AlterUserScramCredentials
JSON and metadata's UserScramCredentialRecord / RemoveUserScramCredentialRecord."""

from __future__ import annotations

from protocol.messages import sasl
from protocol.messages import user_scram_credentials as usc
from protocol.messages.metadata_records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    frame,
    unframe,
)


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_sasl_handshake() -> None:
    assert sasl.SaslHandshakeRequest(mechanism="PLAIN").encode(1) == _hex("0005 504c41494e")
    resp = sasl.SaslHandshakeResponse(error_code=33, mechanisms=["PLAIN"])
    assert resp.encode(0) == _hex("0021 00000001 0005 504c41494e")
    assert sasl.SaslHandshakeResponse.decode(resp.encode(1), 1) == resp


def test_sasl_authenticate() -> None:
    req = sasl.SaslAuthenticateRequest(auth_bytes=b"\0u\0p")
    assert req.encode(0) == _hex("00000004 00750070")
    assert req.encode(2) == _hex("05 00750070 00")  # compact bytes, then the tags
    resp = sasl.SaslAuthenticateResponse(error_code=58, error_message="no", auth_bytes=b"", session_lifetime_ms=0)
    assert resp.encode(0) == _hex("003a 0002 6e6f 00000000")
    assert resp.encode(1) == _hex("003a 0002 6e6f 00000000 0000000000000000")
    assert resp.encode(2) == _hex("003a 03 6e6f 01 0000000000000000 00")
    assert sasl.SaslAuthenticateResponse.decode(resp.encode(2), 2) == resp


def test_describe_and_alter_user_scram_credentials() -> None:
    assert usc.DescribeUserScramCredentialsRequest(users=None).encode(0) == _hex("00 00")
    assert usc.DescribeUserScramCredentialsRequest(users=[usc.UserName(name="a")]).encode(0) == _hex("02 02 61 00 00")
    resp = usc.DescribeUserScramCredentialsResponse(results=[usc.DescribeUserScramCredentialsResult(
        user="a", credential_infos=[usc.CredentialInfo(mechanism=2, iterations=4096)])])
    assert resp.encode(0) == _hex("00000000 0000 00 02 02 61 0000 00 02 02 00001000 00 00 00")
    alter = usc.AlterUserScramCredentialsRequest(
        deletions=[usc.ScramCredentialDeletion(name="a", mechanism=1)],
        upsertions=[usc.ScramCredentialUpsertion(name="b", mechanism=2, iterations=8192, salt=b"s",
                                                 salted_password=b"pw")])
    assert alter.encode(0) == _hex("02 02 61 01 00  02 02 62 02 00002000 02 73 03 7077 00  00")
    assert usc.AlterUserScramCredentialsRequest.decode(alter.encode(0), 0) == alter


def test_scram_credential_records() -> None:
    rec = UserScramCredentialRecord(name="a", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v",
                                    iterations=4096)
    framed = frame(rec)
    # frame version 1, type 11, version 0; name, mechanism, salt, stored key, server key, iterations, tags
    assert framed == _hex("01 0b 00  02 61 01 02 73 02 6b 02 76 00001000 00")
    assert unframe(framed) == rec
    removal = RemoveUserScramCredentialRecord(name="a", mechanism=2)
    assert frame(removal) == _hex("01 16 00  02 61 02 00")
    assert unframe(frame(removal)) == removal

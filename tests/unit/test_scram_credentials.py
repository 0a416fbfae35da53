"""Issue 27: SCRAM credentials as metadata — AlterUserScramCredentials decided by the controller
with Kafka's checks (broker/controller/scram.py), applied to the image as
UserScramCredentialRecord / RemoveUserScramCredentialRecord and kept through a snapshot, with no
password (nor salted password) anywhere in the image."""

from __future__ import annotations

from broker.controller.scram import Upsertion, decide
from broker.metadata.image import MetadataImage
from protocol.errors import ErrorCode
from protocol.messages.metadata_records import frame, unframe
from protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramClient

SALT = b"0123456789abcdef"


def _upsert(user: str, password: str, mech: int = 1, iterations: int = 4096) -> Upsertion:
    m = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}.get(mech, SCRAM_SHA_256)
    return Upsertion(user, mech, iterations, SALT, m.salted_password(password, SALT, iterations))


def _apply(image: MetadataImage, records: list) -> MetadataImage:  # type: ignore[type-arg]
    for r in records:
        image = image.apply(image.offset + 1, unframe(frame(r)))
    return image


def test_upsert_then_log_in_then_delete() -> None:
    results, records = decide({}, [], [_upsert("alice", "pw"), _upsert("alice", "pw", 2, 8192)])
    assert results == {"alice": (0, None)}
    image = _apply(MetadataImage(), records)
    cred = image.scram_credential("alice", 1)
    assert cred is not None and image.scram_credential("alice", 2).iterations == 8192  # type: ignore[union-attr]
    # what is kept logs the user in (client proof checked against StoredKey)...
    client = ScramClient(SCRAM_SHA_256, "alice", "pw", "n1")
    client.first()
    client.final(f"r=n1xyz,s={__import__('base64').b64encode(cred.salt).decode()},i=4096".encode())
    # ...and holds neither the password nor the salted password
    snapshot = image.to_snapshot()
    assert SCRAM_SHA_256.salted_password("pw", SALT, 4096).hex() not in snapshot.hex() and b"pw\"" not in snapshot
    restored = MetadataImage.from_snapshot(snapshot)
    assert restored.scram == image.scram
    results, records = decide(image.scram, [("alice", 2)], [])
    assert results == {"alice": (0, None)}
    after = _apply(image, records)
    assert after.scram_credential("alice", 2) is None and after.scram_credential("alice", 1) == cred


def test_kafka_checks_one_result_per_user() -> None:
    existing = decide({}, [], [_upsert("bob", "pw")])[1]
    image = _apply(MetadataImage(), existing)
    results, records = decide(image.scram, [("carol", 1), ("bob", 1)], [
        _upsert("dave", "pw", iterations=100), _upsert("erin", "pw", iterations=20000), _upsert("", "pw"),
        _upsert("frank", "pw", mech=9), _upsert("bob", "pw2"), _upsert("gina", "pw")])
    assert results == {
        "carol": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "bob": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "dave": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "erin": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "frank": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "gina": (0, None),
    }
    assert [r.name for r in records] == ["gina"]  # only the users without an error are written

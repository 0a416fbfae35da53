"""AlterUserScramCredentials decided, sans I/O: Kafka's checks (ScramControlManager's) on the
deletions and upsertions against the committed image, one result per user, and the records of
the users that passed. The salted password a client sends becomes StoredKey and ServerKey here;
it is never written anywhere."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.messages.metadata_records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from protocol.scram import BY_TYPE, ScramCredential


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


Record = UserScramCredentialRecord | RemoveUserScramCredentialRecord


def decide(existing: Mapping[tuple[str, int], ScramCredential], deletions: Sequence[tuple[str, int]],
           upsertions: Sequence[Upsertion]) -> tuple[dict[str, tuple[int, str | None]], list[Record]]:
    """(user -> (error code, message), records to write for the users without an error)."""
    errors: dict[str, tuple[int, str]] = {}
    users = [u for u, _ in deletions] + [u.user for u in upsertions]
    seen: set[tuple[str, int]] = set()

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, (code, message))

    for user, mech in [*deletions, *((u.user, u.mechanism) for u in upsertions)]:
        if (user, mech) in seen:
            fail(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        seen.add((user, mech))
        if not user:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        if mech not in BY_TYPE:
            fail(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for user, mech in deletions:
        if (user, mech) not in existing:
            fail(user, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    for u in upsertions:
        m = BY_TYPE.get(u.mechanism)
        if m is None:
            continue
        if u.iterations < m.min_iterations:
            fail(u.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > m.max_iterations:
            fail(u.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if not u.salt or not u.salted_password:
            fail(u.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    records: list[Record] = [RemoveUserScramCredentialRecord(name=user, mechanism=mech)
                             for user, mech in deletions if user not in errors]
    for u in upsertions:
        if u.user in errors:
            continue
        cred = ScramCredential.from_salted(BY_TYPE[u.mechanism], u.salt, u.salted_password, u.iterations)
        records.append(UserScramCredentialRecord(name=u.user, mechanism=u.mechanism, salt=cred.salt,
                                                 stored_key=cred.stored_key, server_key=cred.server_key,
                                                 iterations=cred.iterations))
    results: dict[str, tuple[int, str | None]] = {}
    for user in users:
        results[user] = errors.get(user, (ErrorCode.NONE, None))
    return results, records

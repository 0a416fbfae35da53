"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51): which SCRAM
credentials exist (mechanism and iterations, never the keys), and setting or deleting them. The
client salts the password; the broker never sees it."""

from __future__ import annotations

from ..schema import BYTES, INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

DESCRIBE_KEY = 50
ALTER_KEY = 51


@schema
class UserName(Struct):
    name: str = f(STRING)


@schema
class DescribeUserScramCredentialsRequest(Message):
    API_KEY = DESCRIBE_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    users: list[UserName] | None = f(Array(UserName), default=None)  # null or empty: every user


@schema
class CredentialInfo(Struct):
    mechanism: int = f(INT8)
    iterations: int = f(INT32)


@schema
class DescribeUserScramCredentialsResult(Struct):
    user: str = f(STRING)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    credential_infos: list[CredentialInfo] = f(Array(CredentialInfo))


@schema
class DescribeUserScramCredentialsResponse(Message):
    API_KEY = DESCRIBE_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    results: list[DescribeUserScramCredentialsResult] = f(Array(DescribeUserScramCredentialsResult))


@schema
class ScramCredentialDeletion(Struct):
    name: str = f(STRING)
    mechanism: int = f(INT8)


@schema
class ScramCredentialUpsertion(Struct):
    name: str = f(STRING)
    mechanism: int = f(INT8)
    iterations: int = f(INT32)
    salt: bytes = f(BYTES)
    salted_password: bytes = f(BYTES)


@schema
class AlterUserScramCredentialsRequest(Message):
    API_KEY = ALTER_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    deletions: list[ScramCredentialDeletion] = f(Array(ScramCredentialDeletion))
    upsertions: list[ScramCredentialUpsertion] = f(Array(ScramCredentialUpsertion))


@schema
class AlterUserScramCredentialsResult(Struct):
    user: str = f(STRING)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)


@schema
class AlterUserScramCredentialsResponse(Message):
    API_KEY = ALTER_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    results: list[AlterUserScramCredentialsResult] = f(Array(AlterUserScramCredentialsResult))

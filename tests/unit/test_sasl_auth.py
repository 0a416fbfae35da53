"""Issue 27: the SASL state machines, sans I/O — the client's SCRAM (protocol/scram.py) and the
broker's PLAIN and SCRAM (broker/security/sasl.py), checked against RFC 7677's worked example
and against each other, with every way an exchange must fail."""

from __future__ import annotations

import pytest

from broker.security.sasl import AuthenticationFailed, SaslAuthenticator
from protocol.errors import ErrorCode
from protocol.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramError,
    ScramMechanism,
    unb64,
)

# RFC 7677 §3: user "user", password "pencil"
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = unb64("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

CREDS = {(u, m.name): ScramCredential.from_password(m, p, 4096)
         for u, p in (("alice", "alice-secret"), ("bob", "b,o=b")) for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def lookup(user: str, mech: ScramMechanism) -> ScramCredential | None:
    return CREDS.get((user, mech.name))


def server(mechanism: str, **kw: object) -> SaslAuthenticator:
    auth = SaslAuthenticator(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], {"carol": "carol-pw"}, lookup, **kw)  # type: ignore[arg-type]
    assert auth.handshake(mechanism) == 0
    return auth


def test_rfc7677_example_from_both_sides() -> None:
    cred = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    auth = SaslAuthenticator(["SCRAM-SHA-256"], {}, lambda u, m: cred if u == "user" else None,
                             server_nonce=lambda: RFC_SERVER_NONCE)
    assert auth.handshake("SCRAM-SHA-256") == 0
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", RFC_CLIENT_NONCE)
    server_first = auth.step(client.first())
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final(server_first) == RFC_CLIENT_FINAL
    assert auth.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    client.verify(RFC_SERVER_FINAL)
    assert auth.principal == "User:user"


@pytest.mark.parametrize("mech", [SCRAM_SHA_256, SCRAM_SHA_512])
@pytest.mark.parametrize("user,password", [("alice", "alice-secret"), ("bob", "b,o=b")])
def test_scram_round_trip(mech: ScramMechanism, user: str, password: str) -> None:
    auth = server(mech.name)
    client = ScramClient(mech, user, password)
    client.verify(auth.step(client.final(auth.step(client.first()))))
    assert auth.principal == f"User:{user}"


def _fails(auth: SaslAuthenticator, client: ScramClient) -> str:
    first = auth.step(client.first())
    with pytest.raises(AuthenticationFailed) as e:
        auth.step(client.final(first))
    assert auth.principal is None
    return str(e.value)


@pytest.mark.parametrize("mech", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_wrong_password_and_unknown_user_fail_alike(mech: ScramMechanism) -> None:
    wrong = _fails(server(mech.name), ScramClient(mech, "alice", "not-it"))
    unknown = _fails(server(mech.name), ScramClient(mech, "mallory", "alice-secret"))
    assert wrong == unknown and "invalid credentials" in wrong


def test_scram_unknown_user_gets_the_same_salt_each_time() -> None:
    """A salt that changed at every attempt would tell an attacker the user does not exist."""
    key = b"k" * 32
    firsts = [server("SCRAM-SHA-256", fake_key=key).step(ScramClient(SCRAM_SHA_256, "mallory", "x").first())
              for _ in range(2)]
    salts = [dict(p.split("=", 1) for p in f.decode().split(","))["s"] for f in firsts]
    assert salts[0] == salts[1]


def test_scram_bad_nonce_refused() -> None:
    auth = server("SCRAM-SHA-256")
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-secret")
    first = auth.step(client.first())
    final = client.final(first).decode()
    nonce = final.split(",")[1][2:]
    with pytest.raises(AuthenticationFailed, match="nonce"):
        auth.step(final.replace(nonce, nonce[:-1] + ("A" if nonce[-1] != "A" else "B")).encode())


def test_scram_bad_proof_refused() -> None:
    auth = server("SCRAM-SHA-512")
    client = ScramClient(SCRAM_SHA_512, "alice", "alice-secret")
    final = client.final(auth.step(client.first())).decode()
    proof = final.rsplit("p=", 1)[1]
    forged = bytearray(unb64(proof))
    forged[0] ^= 1
    import base64
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        auth.step(final.replace(proof, base64.b64encode(bytes(forged)).decode()).encode())


def test_scram_client_refuses_a_server_that_does_not_know_the_credential() -> None:
    """The server signature proves the server holds ServerKey: an impostor that answered the
    exchange with a credential of its own is caught by the client."""
    impostor = SaslAuthenticator(["SCRAM-SHA-256"], {}, lambda u, m: ScramCredential.from_password(m, "guess"))
    impostor.handshake("SCRAM-SHA-256")
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-secret")
    first = impostor.step(client.first())
    final = client.final(first)
    with pytest.raises(AuthenticationFailed):
        impostor.step(final)  # the impostor cannot check the proof either...
    # ...and a server signature it makes up is refused
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + b"QUFBQQ==")


def test_scram_client_refuses_a_nonce_that_does_not_extend_its_own() -> None:
    client = ScramClient(SCRAM_SHA_256, "alice", "pw", "abc")
    with pytest.raises(ScramError, match="nonce"):
        client.final(b"r=xyz123,s=QUFBQQ==,i=4096")
    with pytest.raises(ScramError, match="iteration"):
        ScramClient(SCRAM_SHA_256, "alice", "pw", "abc").final(b"r=abc123,s=QUFBQQ==,i=1")


def test_scram_malformed_and_replayed_messages_refused() -> None:
    with pytest.raises(AuthenticationFailed):
        server("SCRAM-SHA-256").step(b"p=tls-unique,,n=alice,r=abc")  # channel binding
    with pytest.raises(AuthenticationFailed):
        server("SCRAM-SHA-256").step(b"garbage")
    with pytest.raises(AuthenticationFailed):
        server("SCRAM-SHA-256").step(b"\xff\xfe")
    auth = server("SCRAM-SHA-256")
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-secret")
    final = client.final(auth.step(client.first()))
    auth.step(final)
    with pytest.raises(AuthenticationFailed):
        auth.step(final)  # done: nothing more is taken


def test_plain() -> None:
    auth = server("PLAIN")
    assert auth.step(b"\0carol\0carol-pw") == b""
    assert auth.principal == "User:carol"
    auth = server("PLAIN")
    auth.step(b"carol\0carol\0carol-pw")  # an authorization id equal to the user is fine
    assert auth.principal == "User:carol"


@pytest.mark.parametrize("token", [b"\0carol\0wrong", b"\0nobody\0carol-pw", b"\0carol\0", b"carol\0carol-pw",
                                   b"dave\0carol\0carol-pw", b"\0\0"])
def test_plain_refusals(token: bytes) -> None:
    auth = server("PLAIN")
    with pytest.raises(AuthenticationFailed):
        auth.step(token)
    assert auth.principal is None


def test_handshake() -> None:
    auth = SaslAuthenticator(["SCRAM-SHA-512", "GSSAPI"], {}, lookup)
    assert auth.enabled == ["SCRAM-SHA-512"]  # only what is implemented is offered
    assert auth.handshake("PLAIN") == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    with pytest.raises(AuthenticationFailed):
        auth.step(b"\0carol\0carol-pw")  # no mechanism chosen yet
    assert auth.handshake("SCRAM-SHA-512") == 0
    assert auth.handshake("SCRAM-SHA-512") == ErrorCode.ILLEGAL_SASL_STATE

"""Authentication: listeners and their security protocols, TLS, SASL (docs/security.md)."""

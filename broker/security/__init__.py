"""Security: authentication (listeners and their security protocols, TLS, SASL) sets
ClientInfo.principal; the authorizer (ACLs) decides what it may do (docs/security.md)."""

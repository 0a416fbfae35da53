"""Who may do what: the authorizer (ACLs). Authentication sets ClientInfo.principal elsewhere."""

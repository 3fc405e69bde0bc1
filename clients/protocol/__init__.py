"""clients/protocol package."""

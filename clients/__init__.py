"""clients package."""

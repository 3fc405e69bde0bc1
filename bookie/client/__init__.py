"""bookie/client package."""

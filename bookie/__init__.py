"""bookie package."""

"""Bookie server tests."""

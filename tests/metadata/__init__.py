"""Tests of the metadata store (contract suite over all backends) and the shared fixtures."""

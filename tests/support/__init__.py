"""Helpers shared by the test tiers (unit, contracts, integration, e2e)."""

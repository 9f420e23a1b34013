"""Pressroom package."""

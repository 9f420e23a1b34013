"""Shared vocabulary at the bottom of the layers: errors, settings, durations, queue names, the clock.

Nothing here imports another Pressroom package.
"""

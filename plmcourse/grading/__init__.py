"""Checks that the notebooks' visible and hidden tests call."""

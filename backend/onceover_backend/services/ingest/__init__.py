"""Storing the events jobs send and the state they add up to, in one transaction."""

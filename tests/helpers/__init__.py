"""Helpers the tests share: local receivers, waits, the Write API's test doubles, the tier clock."""

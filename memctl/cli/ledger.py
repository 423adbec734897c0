"""Ledger and episode commands (issue 3). Registers itself on the root app."""

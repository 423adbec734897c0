"""state commands. Registers itself on the root app."""

"""recall commands. Registers itself on the root app."""

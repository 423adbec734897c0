"""jobs commands. Registers itself on the root app."""

"""near-dup and cache commands (issue 5). Registers itself on the root app."""

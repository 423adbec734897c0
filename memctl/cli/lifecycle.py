"""lifecycle commands (issue 8). Registers itself on the root app."""

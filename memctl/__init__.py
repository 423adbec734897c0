"""memctl: durable memory for AI agents, kept in plain files in a git repository."""

__version__ = "0.1.0"

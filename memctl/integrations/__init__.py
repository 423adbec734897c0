"""What speaks other programs' formats: Claude Code's settings and hooks, the MCP server.

These modules sit at the top of the house: they use the library, and only the
CLI uses them.
"""

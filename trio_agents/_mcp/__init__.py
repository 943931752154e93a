"""MCP servers' tools: the configuration shapes, a stdio server's owned process, the tools
of the servers a block opened, and the servers a runtime's agents share.
"""

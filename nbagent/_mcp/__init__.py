"""Tools from MCP servers (stdio or streamable HTTP), offered like `@tool` functions."""

from ._source import MCPSource

__all__ = ["MCPSource"]

"""The Agent Client Protocol server: `AcpServer` for one connection, `serve_stdio` for a
whole `trio-agents acp` process."""

from ._server import AcpServer as AcpServer
from ._stdio import serve_stdio as serve_stdio

__all__ = ["AcpServer", "serve_stdio"]

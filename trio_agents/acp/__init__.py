"""The Agent Client Protocol server: `AcpServer` for one connection, `serve_stdio` for a
whole `trio-agents acp` process."""

from .._util import fixup_module_metadata as _fixup_module_metadata
from ._server import AcpServer as AcpServer
from ._stdio import serve_stdio as serve_stdio

__all__ = ["AcpServer", "serve_stdio"]

_fixup_module_metadata(__name__, [globals()[name] for name in __all__])

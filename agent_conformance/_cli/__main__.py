"""`python -m agent_conformance._cli`: the `agent-conformance` command, from whichever
checkout is imported (the tests spawn it so, to test the checkout rather than an installed
script)."""

import sys

from . import main

if __name__ == "__main__":  # not when a tool imports every module of the package
    sys.exit(main())

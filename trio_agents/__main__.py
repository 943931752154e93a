"""`python -m trio_agents`: the `trio-agents` command, from whichever checkout is imported."""

import sys

from ._cli import main

sys.exit(main())

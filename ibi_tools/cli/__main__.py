"""``python -m ibi_tools.cli``: the ``ibi`` command."""

import sys

from ibi_tools.cli import main

sys.exit(main())

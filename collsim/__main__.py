"""``python -m collsim`` is the same as the ``collsim`` command."""

import sys

from .cli import main

sys.exit(main())

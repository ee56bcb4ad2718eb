"""``python -m pbsens`` is the ``pbsens`` command."""
import sys

from .cli import main

sys.exit(main())

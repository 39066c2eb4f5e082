import sys

from .stdio import main

sys.exit(main())

import sys

from nbagent.mock.cli import main

sys.exit(main())

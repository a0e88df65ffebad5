import sys

from plmcourse.cli import main

sys.exit(main())

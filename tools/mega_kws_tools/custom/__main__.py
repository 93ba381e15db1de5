# SPDX-License-Identifier: Apache-2.0
import sys

from mega_kws_tools.custom.cli import main

sys.exit(main())

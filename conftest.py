"""Settings for every test and doctest: English feedback whatever the machine's locale.

``collsim.teach`` speaks Japanese under a ``ja`` locale (LANG=ja_JP.UTF-8); the English
tests and docstring examples assert English output, so they pin the language here. The
Japanese tests set their own environment for the lessons they run.
"""

import os

os.environ["COLLSIM_LANG"] = "en"

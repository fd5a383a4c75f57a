import os
import sys

# gates.py and upstream.py, the tests' own helpers, import as top-level modules.
sys.path.insert(0, os.path.dirname(__file__))

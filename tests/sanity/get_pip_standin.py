"""Stand-in for ansible-test's get-pip-24.2.py: bootstrap pip from the standard library, then pin it.

ansible-test downloads get-pip from a host this machine cannot reach; it first looks for a
cached copy, which `make sanity` puts in place from this file.
"""

import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]))

"""The launcher: runs inside the Triton container with the Python standard library only."""

"""`python -m mcpx.demo_upstream`: the old name of the demo upstream (now mcpx/demo/upstream.py).

Kept because configs written by earlier versions, and the keepers still running them, name it."""

from mcpx.demo.upstream import main

if __name__ == "__main__":
    main()

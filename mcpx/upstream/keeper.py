"""`python -m mcpx.upstream.keeper`: the old name of the stdio keeper (now mcpx/upstream/stdio/keeper.py).

Kept because keepers started by an earlier version run under this name: keeper_wire.KEEPER_MODULES
recognises both, so a new daemon adopts them."""

from mcpx.upstream.stdio.keeper import main

if __name__ == "__main__":
    main()

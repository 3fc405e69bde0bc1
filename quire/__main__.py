"""`python -m quire` runs the same CLI as the `quire` console script."""

from quire.cli import main

main()

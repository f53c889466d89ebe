"""`python -m cluster` is the drfmesos command."""

from cluster.cli import main

main()

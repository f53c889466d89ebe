"""`python -m cluster` is the drfmesos command."""

from cluster.command import main

main()

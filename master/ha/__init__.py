"""The master's high availability: election, the registry, and recovery."""
